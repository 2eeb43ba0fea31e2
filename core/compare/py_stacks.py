"""Call stacks from ``python_function`` frames: the chain of non-module frames around a point.

Traces recorded with ``with_stack=True`` rarely carry a ``Call stack`` argument on host ops; the
stack is the nesting of Python frames on the op's thread. Modules (their start) and operators
(their start, for `c` on the Operators screen) both read it here.
"""

from __future__ import annotations

import numpy as np

from ..model import Profile
from ..timeline import innermost, thread_key

#: Between two frames of a stack (one frame per line, as the workbook's call-stack cells).
STACK_SEP = ";\n"


def frame_stacks(profile: Profile, key: np.ndarray, start: np.ndarray) -> list[str]:
    """Chain of non-module python frames strictly containing each start, outermost first.

    Walks the python-function nesting upward from the innermost frame containing the start;
    strings are memoised per frame so shared prefixes are built once.
    """
    pf = profile.pyfuncs
    n = len(start)
    if pf.empty:
        return [""] * n
    pkey = thread_key(pf["pid"].to_numpy(), pf["tid"].to_numpy())
    parent = pf["parent"].to_numpy()
    up = parent.tolist()
    is_module = pf["is_module"].tolist()
    names = pf["name"].tolist()
    hit = innermost(pkey, pf["start_ns"].to_numpy(), pf["end_ns"].to_numpy(), parent, key, start,
                    strict=True)
    memo: dict[int, str] = {-1: ""}
    # Each step calls its frames anew: equal stacks are one text, not one per frame row.
    texts_seen: dict[str, str] = {}

    def stack_of(row: int) -> str:
        chain = []
        while row not in memo:
            chain.append(row)
            row = up[row]
        text = memo[row]
        for r in reversed(chain):
            if not is_module[r]:
                text = f"{text}{STACK_SEP}{names[r]}" if text else names[r]
            memo[r] = text = texts_seen.setdefault(text, text)
        return text

    # Many starts share their innermost frame (every op of a layer's forward): each frame once.
    frames, at = np.unique(hit, return_inverse=True)
    texts = np.empty(len(frames), dtype=object)
    texts[:] = [stack_of(h) for h in frames.tolist()]
    return texts[at.reshape(-1)].tolist()
