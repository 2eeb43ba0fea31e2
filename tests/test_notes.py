"""Notes are records: their origin, side and screens — not their text — decide where they are shown.

A real run on the GPU fixture pair whose base is given through a symbolic link (the detection
notes it: an input's note) with a profile cache that cannot be created (both loaders note it: a
note about this machine), and the NPU pair's run notes (kernels linked to no host op, made by the
operators step): each shows on the screens its fields name, and once in the README sheet, the
``--json`` document and the app's notes view.
"""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
import pytest
from openpyxl import load_workbook

from perfcmp_core.collect import ResultBuilder
from perfcmp_core.compare import SCREENS
from perfcmp_core.events import Finished
from perfcmp_core.export.json_out import write_json
from perfcmp_core.export.xlsx import write_workbook
from perfcmp_core.notes import ABSENT, INPUT, MACHINE, Note, once
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest
from perfcmp_tui.screens.notes import notes_text
from tui_support import events

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"


def _run(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> ResultBuilder:
    link = tmp / "linked.pt.trace.json"
    link.symlink_to(FIX / "base.pt.trace.json")
    blocker = tmp / "xdg"
    blocker.write_text("a file where the cache folder's parent should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    opts = LoadOptions(use_cache=True)
    request = RunRequest.read(str(link), str(FIX / "comp.pt.trace.json"), opts, opts, CompareOptions())
    builder = ResultBuilder(str(link), str(FIX / "comp.pt.trace.json"))
    for event in comparison_events(request):
        builder.add(event)
    assert builder.finished and builder.failed is None
    return builder


def _only(notes: list[Note], needle: str) -> Note:
    (note,) = [n for n in notes if needle in n.text]
    return note


def test_an_input_note_and_a_machine_note_on_every_screen_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builder = _run(tmp_path, monkeypatch)
    link = tmp_path / "linked.pt.trace.json"
    notes = builder.notes
    linked = _only(notes, "is a symbolic link to")
    # The detection's note, about the base input: said with its side.
    assert (linked.origin, linked.side, linked.screens) == (INPUT, "base", ())
    assert linked.line == f"base: {link} is a symbolic link to {FIX / 'base.pt.trace.json'}"
    # Both loaders could not use the cache: one note about this machine, without a side.
    cache = _only(notes, "cannot be created")
    assert (cache.origin, cache.side, cache.screens) == (MACHINE, "", ())
    assert cache.line.startswith("profile cache: ") and cache.line == cache.text
    # No screen named: every screen shows both, once.
    for screen in SCREENS:
        shown = [n.line for n in builder.notes_for(screen.id)]
        assert shown.count(linked.line) == 1 and shown.count(cache.line) == 1, screen.id

    # The README sheet and the JSON document say each once, as the screens do.
    result = builder.snapshot()
    book = load_workbook(write_workbook(result, tmp_path / "out"), read_only=True)
    cells = [c.value for row in book["README"].iter_rows() for c in row if c.value is not None]
    assert cells.count(linked.line) == 1 and cells.count(cache.line) == 1
    document = orjson.loads(write_json(result, tmp_path / "run.json").read_bytes())
    assert document["notes"].count(linked.line) == 1 and document["notes"].count(cache.line) == 1

    # The app's `!` view: listed once, under the first screen, naming the others.
    titles = [(s.title, builder.notes_for(s.id)) for s in SCREENS]
    body = notes_text(titles).plain
    assert body.count(linked.line) == 1
    assert f"{SCREENS[0].title} (also: {', '.join(s.title for s in SCREENS[1:])})" in body


@functools.cache
def _npu_finished() -> Finished:
    return next(e for e in events("npu") if isinstance(e, Finished))


def test_a_step_note_shows_on_the_screens_of_its_step_only() -> None:
    """The operators step's notes (kernels linked to no host op) name its two screens: the
    Operators and Modules screens show them, the Overall screen does not."""
    builder = ResultBuilder("a", "b")
    for event in events("npu"):
        builder.add(event)
    unlinked = [n for n in _npu_finished().notes if "linked to no host op" in n.text]
    assert len(unlinked) == 2  # fixtures/README.md: 12 kernels per side carry no async_npu flow
    for note in unlinked:
        assert note.screens == ("modules", "operators") and note.side == ""
        assert note in builder.notes_for("operators") and note in builder.notes_for("modules")
        assert note not in builder.notes_for("overall") and note not in builder.notes_for("kernels")


def test_fields_not_text_decide_where_a_note_goes() -> None:
    """Two notes with the same words: the one naming a screen stays there; a machine note is
    one line for both sides; an input note takes its side."""
    from perfcmp_core.events import Loaded, Skipped

    text = "profile cache: /x: cannot be written; loaded without it"
    b = ResultBuilder("A", "B")
    # An input note whose words look like the machine's: it is the base input's, said with its side.
    b.add(Loaded("base", {}, (Note(text, MACHINE), Note(text))))
    b.add(Loaded("comparison", {}, (Note(text, MACHINE),)))
    b.add(Skipped(("KernelCompare",), "kernel comparison needs NPU"))
    assert [n.line for n in b.notes] == [text, f"base: {text}", "kernel comparison needs NPU"]
    absent = b.notes[-1]
    assert (absent.origin, absent.screens) == (ABSENT, ("kernels",))
    assert absent in b.notes_for("kernels") and absent not in b.notes_for("overall")
    # A note said twice (by two steps) is listed once, where the first says it.
    first = Note("same words", "operators / modules", screens=("operators",))
    assert once([first, Note("same words", "memory", screens=("memory",))]) == [first]
