"""Why a step took as long as it did: every nanosecond of every step, explained.

:func:`explain_profile` splits each step window of one profile into compute (by kernel class),
exposed communication (wait / transmit, by collective) and idle time by cause (synchronisation,
host work, launch-bound, copies, device-side waits); the comparison and its "why" sentence come
from two such explanations. docs/explain.md has the rules and what a trace cannot tell.
"""

from .explanation import COMMUNICATION, COMPUTE, IDLE, PARTS, StepExplanation, explain_profile
from .idle import CAUSES

__all__ = ["CAUSES", "COMMUNICATION", "COMPUTE", "IDLE", "PARTS", "StepExplanation", "explain_profile"]
