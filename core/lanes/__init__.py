"""The Timeline: one step of each side as lanes, base above comparison (issue 26).

Not to be confused with :mod:`perfcmp_core.timeline`, the interval arithmetic everything uses.

* :mod:`.build` — which lanes a step has and what they hold (device streams, host threads,
  nn.Module levels, idle time by cause);
* :mod:`.table` — both sides' lanes as the ``Timeline`` table (the comparison step that makes it,
  the event that carries it to the app) and back as :class:`~.table.SideLanes`;
* :mod:`.bins` — what each terminal cell of a lane shows, in work proportional to the cells;
* :mod:`.picture` — cells as glyphs (distinct per class, so they survive ``NO_COLOR``), the
  legend, and the whole picture as plain text (``export`` writes it beside the workbook).
"""

from .bins import Cells, LaneIndex
from .table import TIMELINE, Lane, SideLanes, sides_of, timeline_table

__all__ = ["Cells", "Lane", "LaneIndex", "SideLanes", "TIMELINE", "sides_of", "timeline_table"]
