"""Fuzzing every loader with damaged copies of the fixtures (property-based, hypothesis).

The property, for every damaged input: loading it either gives a profile that satisfies the model
(``Profile.check``) or raises :class:`InputError` with a one-line message naming a file — never
another exception, never a hang (each example runs under a :data:`BUDGET_S` alarm), and never a
new file next to the inputs. The damage imitates how profiles really break: files cut at any
byte, bytes flipped, inserted or deleted, JSON values replaced by values of the wrong type,
events dropped, CSV columns and rows deleted and cells filled with junk, Db tables dropped,
columns NULLed or filled with junk, Db pages corrupted.

A last group feeds damaged profiles through the whole comparison and the workbook writer, since
a loader that accepts odd data must not push the crash one stage further.

``PERFCMP_FUZZ_EXAMPLES`` raises the number of examples per target for a longer local run, and
``PERFCMP_FUZZ_RANDOM=1`` draws new examples each run. By default the examples are derandomized: the
same damaged inputs every run, so a red test run is caused by the change under test and can be
reproduced, while a longer random run (``PERFCMP_FUZZ_RANDOM=1 PERFCMP_FUZZ_EXAMPLES=300``) is how
new damage patterns are searched for; each one found becomes a named regression test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from perfcmp_core import pipeline
from perfcmp_core.collect import collect
from perfcmp_core.request import RunRequest
from perfcmp_core.errors import InputError
from perfcmp_core.export.xlsx import NothingToWrite, write_workbook
from perfcmp_core.load import gpu_read, load_profile
from perfcmp_core.model import SCHEMAS
from perfcmp_core.options import CompareOptions, LoadOptions

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
OUTPUT = "ASCEND_PROFILER_OUTPUT"
DB_FILE = "ascend_pytorch_profiler_0.db"

#: Seconds one example may take (load, or load + compare + workbook) before it counts as a hang.
BUDGET_S = 5.0
EXAMPLES = int(os.environ.get("PERFCMP_FUZZ_EXAMPLES", "40"))
RANDOM = os.environ.get("PERFCMP_FUZZ_RANDOM") == "1"
NO_CACHE = LoadOptions(use_cache=False)

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------ the property


class Hang(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` can swallow it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_clean_error(exc: InputError) -> None:
    message = exc.message
    assert message.strip() and "\n" not in message and "\r" not in message
    assert exc.path, f"the error names no file: {message}"


def load_outcome(path: Path) -> str:
    """``"loaded"`` or ``"input error"``; any other outcome fails the example."""
    with time_limit(BUDGET_S):
        try:
            profile = load_profile(str(path), NO_CACHE)
        except InputError as exc:
            check_clean_error(exc)
            return "input error"
    profile.check()
    return "loaded"


# ------------------------------------------------------------------------------ workspaces


class Workspace:
    """A private copy of a fixture; every example damages it and :meth:`restore` undoes that.

    A plain class with a short ``repr``: hypothesis prints the fixtures of a failing example,
    and a dataclass would be printed field by field, megabytes of file content included.
    """

    def __init__(self, root: Path, folder: Path, originals: dict[Path, bytes]) -> None:
        self.root = root  # what is passed to the loader
        self.folder = folder  # the copied tree
        self.originals = originals

    def __repr__(self) -> str:
        return f"Workspace({self.root})"

    def names(self) -> set[str]:
        return {str(p.relative_to(self.folder)) for p in self.folder.rglob("*")}

    def restore(self, names: set[str]) -> None:
        for extra in sorted(self.names() - names, reverse=True):
            p = self.folder / extra
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        for path, data in self.originals.items():
            path.write_bytes(data)


def _workspace(factory: pytest.TempPathFactory, src: Path) -> Workspace:
    folder = factory.mktemp("fuzz")
    if src.is_dir():
        root = Path(shutil.copytree(src, folder / src.name))
    else:
        root = Path(shutil.copyfile(src, folder / src.name))
    originals = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return Workspace(root, folder, originals)


@contextmanager
def damaged(ws: Workspace) -> Iterator[None]:
    """Run one example on ``ws``; afterwards nothing may have been added next to the inputs
    (a lock, journal or ``-shm`` file would mean the loader wrote into the input folder)."""
    names = ws.names()
    try:
        yield
        added = ws.names() - names
        assert not added, f"the loader created {sorted(added)} inside the input folder"
    finally:
        ws.restore(names)


@pytest.fixture(scope="module")
def gpu_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return _workspace(tmp_path_factory, FIX / "gpu" / "comp.pt.trace.json")


@pytest.fixture(scope="module")
def gz_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return _workspace(tmp_path_factory, FIX / "gpu" / "base.pt.trace.json.gz")


@pytest.fixture(scope="module")
def text_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return _workspace(tmp_path_factory, FIX / "npu_text" / "comp_ascend_pt")


@pytest.fixture(scope="module")
def ms_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return _workspace(tmp_path_factory, FIX / "npu_ms" / "comp_ascend_ms")


@pytest.fixture(scope="module")
def db_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return _workspace(tmp_path_factory, FIX / "npu_db" / "comp_ascend_pt")


# ------------------------------------------------------------------------------ byte damage

#: (kind, where as a fraction of the length, a length, a payload)
ByteOp = tuple[str, float, int, bytes]

byte_ops = st.lists(st.tuples(st.sampled_from(["truncate", "flip", "insert", "delete"]),
                              st.floats(0, 1), st.integers(1, 4096), st.binary(min_size=1, max_size=16)),
                    min_size=1, max_size=4)


def apply_bytes(data: bytes, ops: list[ByteOp]) -> bytes:
    for kind, where, length, payload in ops:
        at = min(int(where * len(data)), max(len(data) - 1, 0))
        if kind == "truncate":
            data = data[:at]
        elif kind == "flip":
            chunk = bytes(a ^ b for a, b in zip(data[at:at + len(payload)], payload))
            data = data[:at] + chunk + data[at + len(chunk):]
        elif kind == "insert":
            data = data[:at] + payload + data[at:]
        else:
            data = data[:at] + data[at + length:]
    return data


# ------------------------------------------------------------------------------ JSON damage

#: Values of every JSON type, with the ones profilers get wrong (number-like text, ids past u32,
#: ns-digit timestamps, N/A) over-represented.
junk_json = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["X", "M", "s", "f", "i", "N/A", "", "-1", "1e400", "0x1F", "nan",
                     "1712281895500123.456", "1736500371400126.811\t", 2**64 - 1, 4294967295,
                     -1, 0, 1e308, "Ascend Hardware", "HCCL", "Communication", "cpu_op",
                     "kernel", "[memory]", "ProfilerStep#2", "async_npu", "fwdbwd"]),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.sampled_from(["name", "sort_index", "correlation", "Task Type"]),
                    st.integers(-3, 3), max_size=2),
)
json_ops = st.lists(st.tuples(st.sampled_from(["set", "set", "delete"]), st.floats(0, 1), junk_json),
                    min_size=1, max_size=8)

Path_ = tuple[Any, ...]


def _paths(node: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every (container, key) position of a JSON tree, as key paths, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


_PATHS: dict[Path, list[Path_]] = {}


def apply_json(path: Path, original: bytes, ops: list[tuple[str, float, Any]]) -> bytes:
    """Re-parse ``original`` and replace or delete the values at the chosen positions."""
    doc = orjson.loads(original)
    paths = _PATHS.setdefault(path, list(_paths(doc)))
    for op, where, value in ops:
        target = paths[min(int(where * len(paths)), len(paths) - 1)]
        node = doc
        try:
            for key in target[:-1]:
                node = node[key]
            if op == "delete":
                del node[target[-1]]
            else:
                node[target[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed this position
    return json.dumps(doc).encode()


# ------------------------------------------------------------------------------ CSV damage

junk_cell = st.one_of(
    st.sampled_from(["", "N/A", "-1", "-5.5", "abc", "1e400", "nan", "inf", "\t", "0",
                     "1736500371400126.811\t", "9" * 25, '"', ",", "\n", "é", "NPU:x", "AI_CORE"]),
    st.text(max_size=10),
)
csv_ops = st.lists(st.tuples(st.sampled_from(["drop column", "drop row", "cell", "cell", "copy row",
                                              "drop header"]),
                             st.floats(0, 1), st.floats(0, 1), junk_cell), min_size=1, max_size=6)


def apply_csv(original: bytes, ops: list[tuple[str, float, float, str]]) -> bytes:
    rows = list(csv.reader(io.StringIO(original.decode("utf-8-sig"), newline="")))
    for op, a, b, value in ops:
        if not rows:
            break
        r = min(int(a * len(rows)), len(rows) - 1)
        width = max(len(rows[0]), 1)
        c = min(int(b * width), width - 1)
        if op == "drop column":
            rows = [row[:c] + row[c + 1:] for row in rows]
        elif op == "drop row" and r > 0:
            del rows[r]
        elif op == "cell" and c < len(rows[r]):
            rows[r][c] = value
        elif op == "copy row":
            rows.insert(r, list(rows[r]))
        elif op == "drop header":
            del rows[0]
    buf = io.StringIO(newline="")
    try:
        csv.writer(buf, lineterminator="\n").writerows(rows)
    except csv.Error:  # Python 3.10's writer refuses a NUL character; 3.11+ writes it as is
        buf = io.StringIO(newline="")
        buf.writelines(",".join(_csv_field(f) for f in row) + "\n" for row in rows)
    return buf.getvalue().encode("utf-8")


def _csv_field(text: str) -> str:
    """One field as Python 3.11's ``csv.writer`` writes it (quoted when it must be)."""
    return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"\r\n') else text


# ------------------------------------------------------------------------------ Db damage

junk_sql = st.one_of(
    st.none(),
    st.sampled_from(["abc", "", -1, 4294967295, 2**63 - 1, -2**63, 1e300, -0.5, b"\xff\xfe",
                     "aten::mm", "ProfilerStep#9"]),
    st.integers(-2**63, 2**63 - 1),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
)
db_ops = st.lists(st.tuples(st.sampled_from(["drop table", "delete rows", "set column", "set column"]),
                            st.floats(0, 1), st.integers(1, 5), junk_sql), min_size=1, max_size=5)

_SCHEMA: dict[Path, list[tuple[str, str]]] = {}


def _columns(db: Path) -> list[tuple[str, str]]:
    """(table, column) of every column, read once from the undamaged copy."""
    if db not in _SCHEMA:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                               "ORDER BY name")]
            _SCHEMA[db] = [(t, str(c[1])) for t in names for c in con.execute(f'PRAGMA table_info("{t}")')]
        finally:
            con.close()
    return _SCHEMA[db]


def apply_sql(db: Path, ops: list[tuple[str, float, int, Any]]) -> None:
    columns = _columns(db)
    con = sqlite3.connect(db)
    try:
        for op, where, k, value in ops:
            table, column = columns[min(int(where * len(columns)), len(columns) - 1)]
            statement = {
                "drop table": (f'DROP TABLE "{table}"', ()),
                "delete rows": (f'DELETE FROM "{table}" WHERE rowid % {k + 1} = 0', ()),
                "set column": (f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % {k} = 0', (value,)),
            }[op]
            try:
                con.execute(*statement)
            except sqlite3.Error:
                continue  # table already dropped, or a type the column refuses
        con.commit()
    finally:
        con.close()


# ------------------------------------------------------------------------------ the loaders


def _run(ws: Workspace, file: Path, data: bytes) -> None:
    with damaged(ws):
        file.write_bytes(data)
        event(load_outcome(ws.root))


@FUZZ
@given(ops=byte_ops)
def test_gpu_trace_bytes(gpu_ws: Workspace, ops: list[ByteOp]) -> None:
    _run(gpu_ws, gpu_ws.root, apply_bytes(gpu_ws.originals[gpu_ws.root], ops))


@FUZZ
@given(ops=json_ops)
def test_gpu_trace_values(gpu_ws: Workspace, ops: list[tuple[str, float, Any]]) -> None:
    _run(gpu_ws, gpu_ws.root, apply_json(gpu_ws.root, gpu_ws.originals[gpu_ws.root], ops))


def _outcome_by(path: Path, pieces: bool) -> tuple[str, object]:
    """Load ``path`` parsing the GPU trace in 2 kB pieces, or whole: the error message, or the
    tables and metadata."""
    with pytest.MonkeyPatch.context() as m:
        if pieces:
            m.setattr(gpu_read, "PIECE_BYTES", 2048)
        else:
            m.setattr(gpu_read, "_parse_in_pieces", lambda raw, builder: None)
        with time_limit(BUDGET_S):
            try:
                profile = load_profile(str(path), NO_CACHE)
            except InputError as exc:
                return "input error", exc.message
    return "loaded", profile


@FUZZ
@given(damage=st.one_of(st.tuples(st.just("bytes"), byte_ops), st.tuples(st.just("json"), json_ops)))
def test_gpu_trace_in_pieces_reads_like_the_whole_file(gpu_ws: Workspace,
                                                       damage: tuple[str, list[Any]]) -> None:
    """Differential: a damaged trace (bytes flipped, cut, inserted; values replaced) gives the
    same error, or the same tables, whether its events are parsed in pieces or all at once —
    the cutting never accepts, drops or reorders what a whole-file parse would not."""
    original = gpu_ws.originals[gpu_ws.root]
    kind_of_damage, ops = damage
    data = (apply_bytes(original, ops) if kind_of_damage == "bytes"
            else apply_json(gpu_ws.root, original, ops))
    with damaged(gpu_ws):
        gpu_ws.root.write_bytes(data)
        (kind, got), (want_kind, want) = (_outcome_by(gpu_ws.root, True),
                                          _outcome_by(gpu_ws.root, False))
        event(kind)
    assert kind == want_kind
    if kind == "input error":
        assert got == want
        return
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    assert got.meta == want.meta  # type: ignore[attr-defined]


@FUZZ
@given(ops=byte_ops)
def test_gpu_trace_gzip_bytes(gz_ws: Workspace, ops: list[ByteOp]) -> None:
    _run(gz_ws, gz_ws.root, apply_bytes(gz_ws.originals[gz_ws.root], ops))


@FUZZ
@given(ops=byte_ops)
def test_npu_trace_view_bytes(text_ws: Workspace, ops: list[ByteOp]) -> None:
    tv = text_ws.root / OUTPUT / "trace_view.json"
    _run(text_ws, tv, apply_bytes(text_ws.originals[tv], ops))


@FUZZ
@given(ops=json_ops)
def test_npu_trace_view_values(text_ws: Workspace, ops: list[tuple[str, float, Any]]) -> None:
    tv = text_ws.root / OUTPUT / "trace_view.json"
    _run(text_ws, tv, apply_json(tv, text_ws.originals[tv], ops))


@FUZZ
@given(ops=json_ops)
def test_mindspore_trace_view_values(ms_ws: Workspace, ops: list[tuple[str, float, Any]]) -> None:
    tv = ms_ws.root / OUTPUT / "trace_view.json"
    _run(ms_ws, tv, apply_json(tv, ms_ws.originals[tv], ops))


CSV_FILES = ["kernel_details.csv", "op_statistic.csv", "memory_record.csv", "operator_memory.csv"]


@FUZZ
@given(name=st.sampled_from(CSV_FILES), ops=csv_ops, noise=st.one_of(st.just([]), byte_ops))
def test_npu_csv_files(text_ws: Workspace, name: str, ops: list[tuple[str, float, float, str]],
                       noise: list[ByteOp]) -> None:
    path = text_ws.root / OUTPUT / name
    _run(text_ws, path, apply_bytes(apply_csv(text_ws.originals[path], ops), noise))


SIDE_JSON = [f"{OUTPUT}/communication.json", "profiler_info_0.json", "profiler_metadata.json"]


@FUZZ
@given(name=st.sampled_from(SIDE_JSON), ops=json_ops, noise=st.one_of(st.just([]), byte_ops))
def test_npu_side_json_files(text_ws: Workspace, name: str, ops: list[tuple[str, float, Any]],
                             noise: list[ByteOp]) -> None:
    path = text_ws.root / name
    _run(text_ws, path, apply_bytes(apply_json(path, text_ws.originals[path], ops), noise))


@FUZZ
@given(ops=db_ops)
def test_npu_db_tables(db_ws: Workspace, ops: list[tuple[str, float, int, Any]]) -> None:
    db = db_ws.root / OUTPUT / DB_FILE
    with damaged(db_ws):
        apply_sql(db, ops)
        event(load_outcome(db_ws.root))


@FUZZ
@given(ops=byte_ops)
def test_npu_db_bytes(db_ws: Workspace, ops: list[ByteOp]) -> None:
    db = db_ws.root / OUTPUT / DB_FILE
    _run(db_ws, db, apply_bytes(db_ws.originals[db], ops))


# ------------------------------------------------------------------------------ whole comparisons


END_TO_END = settings(FUZZ, max_examples=max(EXAMPLES // 4, 5))
BASES = {"gpu": FIX / "gpu" / "base.pt.trace.json", "text": FIX / "npu_text" / "base_ascend_pt",
         "db": FIX / "npu_db" / "base_ascend_pt"}


def compare_outcome(base: Path, comp: Path) -> str:
    """Run the whole comparison as ``export`` does (the damaged side is parsed in a worker
    process, so its error also crosses a process boundary) and write the workbook."""
    with time_limit(2 * BUDGET_S):
        try:
            request = RunRequest.read(str(base), str(comp), NO_CACHE, NO_CACHE, CompareOptions())
            result = collect(pipeline.comparison_events(request), str(base), str(comp))
        except InputError as exc:
            check_clean_error(exc)
            return "input error"
        with tempfile.TemporaryDirectory() as out:
            try:
                write_workbook(result, out)
            except NothingToWrite:
                return "compared, nothing to write"
    return "compared"


@END_TO_END
@given(ops=json_ops, base=st.sampled_from(["gpu", "text"]))
def test_compare_damaged_gpu_trace(gpu_ws: Workspace, ops: list[tuple[str, float, Any]],
                                   base: str) -> None:
    with damaged(gpu_ws):
        gpu_ws.root.write_bytes(apply_json(gpu_ws.root, gpu_ws.originals[gpu_ws.root], ops))
        event(compare_outcome(BASES[base], gpu_ws.root))


@END_TO_END
@given(ops=json_ops, csv_damage=csv_ops, base=st.sampled_from(["gpu", "text"]))
def test_compare_damaged_npu_text(text_ws: Workspace, ops: list[tuple[str, float, Any]],
                                  csv_damage: list[tuple[str, float, float, str]], base: str) -> None:
    tv = text_ws.root / OUTPUT / "trace_view.json"
    kd = text_ws.root / OUTPUT / "kernel_details.csv"
    with damaged(text_ws):
        tv.write_bytes(apply_json(tv, text_ws.originals[tv], ops))
        kd.write_bytes(apply_csv(text_ws.originals[kd], csv_damage))
        event(compare_outcome(BASES[base], text_ws.root))


@END_TO_END
@given(ops=db_ops, base=st.sampled_from(["gpu", "db"]))
def test_compare_damaged_npu_db(db_ws: Workspace, ops: list[tuple[str, float, int, Any]],
                                base: str) -> None:
    with damaged(db_ws):
        apply_sql(db_ws.root / OUTPUT / DB_FILE, ops)
        event(compare_outcome(BASES[base], db_ws.root))
