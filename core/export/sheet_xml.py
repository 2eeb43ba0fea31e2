"""The XML of worksheet cells, rendered as text: numbers as numbers, anything else as an inline
string, never a formula.

openpyxl's per-cell serialisation costs ~15 µs a cell (about 4 s for a 20k-row sheet), so the
workbook writer renders ``<row>``/``<c>`` elements here, with the style ids openpyxl registered,
and splices them into the package openpyxl saved. Text is made legal for XML 1.0 and cut to
Excel's cell limit with a visible marker.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Excel's cell text limit, in UTF-16 code units.
CELL_CHARS = 32_767
#: XML 1.0 forbids these characters; Excel refuses files containing them.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NEEDS_ESCAPE = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: The characters of ``_ILLEGAL_XML`` that ASCII text can hold (C0 controls but tab, LF, CR).
_ILLEGAL_ASCII = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])
_MARKER = "…[truncated {} chars]"


@dataclass
class SheetXml:
    """The ``<row>`` elements of one worksheet, as UTF-8 chunks, plus what had to be cut."""

    chunks: list[bytes] = field(default_factory=list)
    truncated: int = 0  # cells cut to Excel's text limit
    rows: int = 0  # data rows written (a sheet holds at most Excel's row limit)

    def add_rows(self, rows: Iterable[str]) -> None:
        self.chunks.append("".join(rows).encode("utf-8", "replace"))

    def cell(self, ref: str, value: object, style: int) -> str:
        """One ``<c>``: numbers as numbers, anything else as an inline string, never a formula.

        Finite floats, strings and ints — nearly every cell, half a million in the module sheets
        of a large NPU export — are recognised by their exact type first; the general tests
        below handle the rest (None, bools, NaN/inf, numpy scalars, other objects)."""
        kind = type(value)
        if kind is float and value - value == 0:  # type: ignore[operator]  # finite
            return f'<c r="{ref}" s="{style}"><v>{float.__repr__(value)}</v></c>'  # type: ignore[arg-type]
        if kind is str:
            return self.text(ref, value, style)  # type: ignore[arg-type]
        if kind is int:
            return f'<c r="{ref}" s="{style}"><v>{int.__repr__(value)}</v></c>'  # type: ignore[arg-type]
        if value is None:
            return f'<c r="{ref}" s="{style}"/>'
        if isinstance(value, bool):
            return f'<c r="{ref}" s="{style}" t="b"><v>{int(value)}</v></c>'
        if isinstance(value, int):
            return f'<c r="{ref}" s="{style}"><v>{int.__repr__(value)}</v></c>'
        if isinstance(value, float):
            if math.isfinite(value):
                return f'<c r="{ref}" s="{style}"><v>{float.__repr__(value)}</v></c>'
            if math.isnan(value):
                return f'<c r="{ref}" s="{style}"/>'
            return self.text(ref, "INF" if value > 0 else "-INF", style)
        return self.text(ref, value if isinstance(value, str) else str(value), style)

    def text(self, ref: str, value: str, style: int) -> str:
        if len(value) > CELL_CHARS // 2:  # only then can it exceed the limit in UTF-16 units
            value = self._fit(value)
        if _NEEDS_ESCAPE.search(value) is not None:
            value = legal(value)
            value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            value = value.replace("\r", "&#13;")
        return (
            f'<c r="{ref}" s="{style}" t="inlineStr">'
            f'<is><t xml:space="preserve">{value}</t></is></c>'
        )

    def _fit(self, value: str) -> str:
        """Cut text to Excel's limit, ending with a visible ``…[truncated N chars]`` marker.

        Excel counts UTF-16 units, so the cut is made on the UTF-16 form (a pair split in two is
        dropped whole). The marker's length depends on N, hence the loop on its digit count.

        Only the head that can be kept is looked at: every character is at least one unit, so
        the first ``CELL_CHARS + 1`` characters decide. Operator kernel details on a large trace
        run to megabytes per cell, and scanning or encoding all of them cost more than the rest
        of the workbook. Characters XML forbids become U+FFFD here (one unit each, like the
        character they replace), so that lone surrogates can be encoded.
        """
        units = legal(value[: CELL_CHARS + 1]).encode("utf-16-le")
        if len(units) <= 2 * CELL_CHARS:
            return value
        self.truncated += 1
        digits = 1
        while True:
            room = CELL_CHARS - len(_MARKER.format(0)) + 1 - digits
            kept = units[: 2 * room].decode("utf-16-le", "ignore")
            cut = len(value) - len(kept)
            if len(str(cut)) <= digits:
                return kept + _MARKER.format(cut)
            digits = len(str(cut))


def legal(value: str) -> str:
    """``value`` with every character XML 1.0 forbids replaced by U+FFFD.

    Most cells are ASCII and hold none: for those one ``bytes.translate`` that drops the C0
    controls tells so ~8x faster than the regular expression (kernel-detail cells of a large
    trace are 32k characters each, and hundreds of them need ``&``/``<`` escaping).
    """
    if value.isascii() and len(value.encode("ascii").translate(None, _ILLEGAL_ASCII)) == len(value):
        return value
    return _ILLEGAL_XML.sub("\ufffd", value)
