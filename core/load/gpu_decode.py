"""Typed decoding of one piece of ``traceEvents``: only the fields the loader reads, no dicts.

``orjson`` builds a dict per event holding every key — a Kineto kernel event carries thirteen
``args``, a cpu_op its module hierarchy and call stack — and the loader then reads eight of
them. ``msgspec`` decodes the same JSON into structs that hold only the :data:`.gpu_events.FIELDS`
of the roles; every other value is skipped without building an object. On the real 34 MB trace
that is half of orjson's time and a fraction of its memory.

The values must be exactly those ``orjson`` gives, since the whole-file parse (the fallback for
anything unusual) and the pieces msgspec refuses are read by orjson, and both must give the same
tables. So the field types are narrow: text fields are ``str`` and numbers ``int | float | str``
(a bool, a list or an object where a number belongs fails validation, and that piece is read by
orjson and handled as before); list-valued arguments (``Input Dims``) are kept as raw JSON and
parsed by orjson, once per distinct text; integers beyond 64 bits, which msgspec keeps exact, are
turned into the floats orjson makes of them. Where the two parsers' checks differ on values the
loader skips:

* **UTF-8**: msgspec does not decode a skipped string, orjson refuses invalid UTF-8 anywhere; a
  piece that is not pure ASCII is decoded once to check it (real traces are ASCII;
  :func:`.pieces.decode_typed`).
* **numbers beyond float range** (``1e400``) in a skipped value: orjson refuses the file,
  msgspec reads past them. No profiler writes such a number; such a trace is read where a
  whole-file parse would refuse it — the one known difference, and an accepting one.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Optional, Union

import msgspec
import orjson

from .gpu_events import _INT, _LINE, _TEXT, _TOP_LEVEL, DEFAULTS, FIELDS
from .pieces import NotLikeOrjson, Structs, decode_typed, orjson_ints

#: A number as the loader accepts it (``ints``/``_us_values`` convert text and floats alike).
_Num = Optional[Union[int, float, str]]
_NO_RAW = msgspec.Raw()


def _attr(key: str) -> str:
    """A Python attribute name for a JSON key (``"Input Dims"`` → ``Input_Dims``)."""
    return "".join(ch if ch.isalnum() else "_" for ch in key)


def _schema() -> tuple[type, type, dict[str, str]]:
    """The ``args`` and event structs of the fields in FIELDS, and JSON key → attribute."""
    arg_kinds: dict[str, int] = {}
    for keys in FIELDS.values():
        for key, kind in keys.items():
            if key not in _TOP_LEVEL:
                arg_kinds[key] = kind
    # An absent integer is -1 straight away (``ints`` reads None as -1 too): the column is then
    # all ints, the fast case.
    types = {_TEXT: (msgspec.Raw, _NO_RAW), _LINE: (Optional[str], None), _INT: (_Num, -1)}
    args_fields = [(_attr(k), *types.get(kind, (_Num, None))) for k, kind in sorted(arg_kinds.items())]
    args_type = msgspec.defstruct("TraceArgs", args_fields, gc=False, frozen=True,
                                  rename={_attr(k): k for k in arg_kinds})
    no_args = args_type()
    event_fields = [("ph", Optional[str], None), ("cat", Optional[str], None),
                    ("name", Optional[str], None), ("pid", _Num, None), ("tid", _Num, None),
                    ("ts", _Num, None), ("dur", _Num, DEFAULTS["dur"]), ("id", _Num, None),
                    ("args", Optional[args_type], no_args)]
    event_type = msgspec.defstruct("TraceEvent", event_fields, gc=False)
    attrs = {k: _attr(k) for k in (*arg_kinds, *(f[0] for f in event_fields))}
    return args_type, event_type, attrs


_ARGS, _EVENT, _ATTRS = _schema()
_EMPTY_ARGS = _ARGS()
_DECODER = msgspec.json.Decoder(list[_EVENT])  # type: ignore[valid-type]
_GETTERS = {key: attrgetter(attr) for key, attr in _ATTRS.items()}


def decode(text: bytes | bytearray) -> StructView | None:
    """The events of ``text`` (a JSON array), or None when msgspec cannot read it like orjson
    (:func:`.pieces.decode_typed`): read it with orjson then."""
    events = decode_typed(_DECODER, text)
    return None if events is None else StructView(events)


class StructView(Structs):
    """Events decoded into structs (see :class:`.gpu_events.EventView`)."""

    getters = _GETTERS
    empty_args = _EMPTY_ARGS

    def render(self, values: list[Any], cache: dict[bytes, str]) -> list[str]:
        """Text fields as they are ("" for none); raw JSON values as ``str()`` of what orjson
        makes of them, each distinct text parsed once for the whole file (shapes repeat every
        step)."""
        if not values or type(values[0]) is not msgspec.Raw:  # a _LINE field: str or None
            return ["" if v is None else v for v in values] if None in values else values
        texts = list(map(bytes, values))
        for text in dict.fromkeys(texts).keys() - cache.keys():
            try:
                value = orjson.loads(text) if text else None
            except orjson.JSONDecodeError:
                raise NotLikeOrjson("a value orjson refuses") from None
            cache[text] = "" if value is None else value if type(value) is str else str(value)
        return list(map(cache.__getitem__, texts))

    def raw(self, values: list[Any]) -> list[Any]:
        return orjson_ints(values)
