"""Typed decoding of one piece of an NPU ``trace_view.json``: only the fields the loader reads.

The same idea as :mod:`.gpu_decode` (why, and how the values stay exactly orjson's): each event
becomes a msgspec struct of the keys :mod:`.npu_trace` reads — top-level ``ph``, ``cat``,
``name``, ``pid``, ``tid``, ``ts``, ``dur``, ``id`` and the :data:`ARG_KEYS` of ``args`` — and
every other value (call-stack-sized ``args`` of other keys, counter samples) is skipped without
building an object. Text fields are ``str`` and numbers ``int | float | str`` (the exporter writes
``ts`` as a µs string with ns digits; MindSpore writes ``dur`` as text too); anything else fails
validation and the piece is read by orjson into dicts. So does an integer beyond int64 (msgspec
keeps it exact where orjson makes it a float or an unsigned int): the schema bounds every integer,
so a decoded piece needs no pass over its numbers to match orjson (≈ 0.4 s of a 0.9 GB trace).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Annotated, Any, Optional, Union

import msgspec

from .pieces import Structs, decode_typed

#: ``args`` keys the loader reads, by the kind of event that carries them.
META_ARGS = ("name", "sort_index")  # process_name / thread_name / thread_sort_index
OP_ARGS = ("Input Dims", "Input type", "Call stack")  # cpu_op
QUEUE_ARGS = ("correlation_id",)  # enqueue / dequeue
DEVICE_ARGS = ("Task Type", "Stream Id", "Physic Stream Id", "Task Id", "connection_id", "stream id")
ARG_KEYS = (*META_ARGS, *OP_ARGS, *QUEUE_ARGS, *DEVICE_ARGS)
#: Keys whose values are text (the rest are numbers, or numbers written as text).
TEXT_ARGS = frozenset({"name", "Input Dims", "Input type", "Call stack", "Task Type"})
TOP_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args")
_TEXT_TOP = frozenset({"ph", "cat", "name"})

#: int64 only: a wider integer fails validation (see the module's docstring).
_Int = Annotated[int, msgspec.Meta(ge=-2**63, le=2**63 - 1)]
_Num = Optional[Union[_Int, float, str]]


def _attr(key: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in key)


_ARGS = msgspec.defstruct(
    "NpuTraceArgs", [(_attr(k), Optional[str] if k in TEXT_ARGS else _Num, None) for k in ARG_KEYS],
    gc=False, frozen=True, rename={_attr(k): k for k in ARG_KEYS})
_EMPTY_ARGS = _ARGS()
_EVENT = msgspec.defstruct(
    "NpuTraceEvent",
    [(k, Optional[str] if k in _TEXT_TOP else Optional[_ARGS] if k == "args" else _Num,  # type: ignore[valid-type]
      _EMPTY_ARGS if k == "args" else None) for k in TOP_KEYS],
    gc=False)
_DECODER = msgspec.json.Decoder(list[_EVENT])  # type: ignore[valid-type]
_GETTERS = {k: attrgetter(_attr(k)) for k in (*TOP_KEYS, *ARG_KEYS)}


class StructView(Structs):
    """NPU events decoded into structs: number fields hold what orjson reads (int64 integers,
    floats, strings), text fields ``str`` or None."""

    getters = _GETTERS
    empty_args = _EMPTY_ARGS


def decode(text: bytes | bytearray) -> StructView | None:
    """The events of ``text`` (a JSON array), or None when msgspec cannot read it like orjson."""
    events = decode_typed(_DECODER, text)
    return None if events is None else StructView(events)
