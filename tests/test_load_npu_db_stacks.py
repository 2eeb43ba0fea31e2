"""NPU Db loader: call stacks from ``PYTORCH_CALLCHAINS``, the table torch_npu writes with
``with_stack``: one chain per op (``PYTORCH_API.callchainId``), a row per frame (``stack``: an
interned id, ``stackDepth``: the frame's place), a few distinct stacks shared by many ops.

The Dbs are written here in the layouts the loader must read alike (rows stored by chain and
depth as real exports store them, or shuffled; with or without the ``stackDepth`` column; frames as
``STRING_IDS`` ids or as inline text), and checked again on the real torch_npu exports in
``../shared/data/npu-real-runs/db`` when present. Every expected stack is derived here from the
rows inserted, chain by chain in plain Python: a chain's frames in ``stackDepth`` order (table
order among equal depths, or all of them when the column is absent) joined with ``;\\n``, a NULL
or unknown frame as ``''``, and ``''`` for an op without a chain or whose chain has no row.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from test_load_npu_db import B, G_MAIN, OP, DbWriter

from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import LoadOptions

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "npu-real-runs" / "db"

#: Three stacks, innermost frame first (stackDepth 0), as the real exports' chains go.
STACKS = (
    ("model.py(5): forward", "module.py(1736): _call_impl", "train.py(20): step", "train.py(50): <module>"),
    ("model.py(9): backward", "train.py(21): step", "train.py(50): <module>"),
    ("optim.py(3): step", "train.py(22): step", "train.py(50): <module>"),
)
N_OPS = 120
NO_CHAIN, DANGLING, GAPS, EMPTY_FRAMES, ONE_FRAME, TWIN_ID = 5, 6, 7, 8, 9, 10

Row = tuple[int, "str | None", int]  # (chain id, frame text or None for a NULL cell, stackDepth)


def chain_rows(null_frame: bool = True) -> tuple[dict[int, int | None], list[Row]]:
    """Each op's chain id and the PYTORCH_CALLCHAINS rows, stored by (chain, depth);
    ``null_frame``: one frame cell is NULL (else every cell is an integer, the real exports' case,
    which the loader reads by a faster query)."""
    chain_of: dict[int, int | None] = {}
    rows: list[Row] = []
    for op in range(N_OPS):
        chain = 3 + 7 * op  # ids neither from 0 nor consecutive
        chain_of[op] = chain
        frames: list[tuple[str | None, int]] = [(t, d) for d, t in enumerate(STACKS[op % 3])]
        if op == NO_CHAIN:
            chain_of[op] = None
            continue
        if op == DANGLING:  # the op names a chain that has no row
            continue
        if op == GAPS:  # depths 0, 1, 5: the order counts, not the numbers
            frames = [("a.py(1): f", 0), ("b.py(2): g", 1), ("c.py(3): h", 5)]
        if op == EMPTY_FRAMES:  # an empty text and a NULL cell are frames of their own
            frames = [("a.py(1): f", 0), ("", 1), (None if null_frame else "", 2), ("c.py(3): h", 3)]
        if op == ONE_FRAME:  # one frame holding the whole text of STACKS[0]
            frames = [(";\n".join(STACKS[0]), 0)]
        rows += [(chain, text, depth) for text, depth in frames]
    return chain_of, rows


def expected_stacks(rows: list[Row], with_depth: bool) -> dict[int, str]:
    frames: dict[int, list[tuple[int, int, str]]] = {}
    for pos, (chain, text, depth) in enumerate(rows):  # pos: table order
        frames.setdefault(chain, []).append((depth if with_depth else 0, pos, text or ""))
    return {chain: ";\n".join(text for _, _, text in sorted(f)) for chain, f in frames.items()}


def write_db(path: Path, chain_of: dict[int, int | None], rows: list[Row], with_depth: bool,
             inline: bool) -> Path:
    w = DbWriter(path)
    w.add("ENUM_API_TYPE", id=OP, name="op")
    for op in range(N_OPS):
        w.api(OP, f"op{op}", 100 * op, 100 * op + 50, G_MAIN, None, chain=chain_of[op])
    # TWIN_ID's first frame is interned twice: another id, the same text (its stack is equal to
    # the other ops' STACKS[1] though its frame ids differ)
    twin = max(w.ids.values()) + 1000
    w.conn.execute("INSERT INTO STRING_IDS VALUES (?, ?)", (twin, STACKS[TWIN_ID % 3][0]))
    w.conn.execute("CREATE TABLE PYTORCH_CALLCHAINS (id INTEGER, stack INTEGER"
                   + (", stackDepth INTEGER)" if with_depth else ")"))
    for chain, text, depth in rows:
        if text is None or inline:
            stack: object = text
        elif chain == chain_of[TWIN_ID] and depth == 0:
            stack = twin
        else:
            stack = w.sid(text)
        values = (chain, stack, depth) if with_depth else (chain, stack)
        w.conn.execute(f"INSERT INTO PYTORCH_CALLCHAINS VALUES ({', '.join('?' * len(values))})", values)
    w.close()
    return path


def _load(path: Path) -> Profile:
    return load_profile(str(path), LoadOptions(use_cache=False))


def objects(values: list[object]) -> int:
    return len({id(v) for v in values})


@pytest.mark.parametrize("cells", ["ids", "ids_null", "inline"])
@pytest.mark.parametrize("with_depth", [True, False], ids=["depth", "no_depth"])
@pytest.mark.parametrize("layout", ["stored", "shuffled"])
def test_call_stack_of_every_op(tmp_path: Path, layout: str, with_depth: bool, cells: str) -> None:
    """``cells``: frames as ``STRING_IDS`` ids (every cell an integer), the same with a NULL
    cell, or as inline text."""
    inline = cells == "inline"
    chain_of, rows = chain_rows(null_frame=cells != "ids")
    if layout == "shuffled":  # chains interleaved, frames of a chain out of depth order
        random.Random(27).shuffle(rows)
    path = write_db(tmp_path / "ascend_pytorch_profiler_0.db", chain_of, rows, with_depth, inline)
    ops = _load(path).ops
    stacks = expected_stacks(rows, with_depth)
    want = {f"op{op}": stacks.get(chain, "") if chain is not None else "" for op, chain in chain_of.items()}
    got = dict(zip(ops["name"], ops["call_stack"]))
    assert got == want
    # the patterns are really there: 3 shared stacks, the odd chains, 2 ops without a stack
    if with_depth:
        assert want["op0"] == want[f"op{ONE_FRAME}"] == ";\n".join(STACKS[0])
        assert want[f"op{TWIN_ID}"] == ";\n".join(STACKS[1])
        assert want[f"op{GAPS}"] == "a.py(1): f;\nb.py(2): g;\nc.py(3): h"
        assert want[f"op{EMPTY_FRAMES}"] == "a.py(1): f;\n;\n;\nc.py(3): h"
    assert want[f"op{NO_CHAIN}"] == want[f"op{DANGLING}"] == ""
    stack_cells = ops["call_stack"].tolist()
    assert objects(stack_cells) == len(set(stack_cells))  # one object per distinct text


def test_call_stacks_absent_table_or_no_rows(tmp_path: Path) -> None:
    chain_of, _ = chain_rows()
    empty = write_db(tmp_path / "ascend_pytorch_profiler_0.db", chain_of, [], True, False)
    assert set(_load(empty).ops["call_stack"]) == {""}
    conn = sqlite3.connect(empty)
    conn.execute("DROP TABLE PYTORCH_CALLCHAINS")
    conn.commit()
    conn.close()
    ops = _load(empty).ops
    assert len(ops) == N_OPS and set(ops["call_stack"]) == {""}


def _real_dbs() -> list[Path]:
    return sorted(REAL.glob("*/*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db"))


@pytest.mark.parametrize("db", _real_dbs() or [pytest.param(None, marks=pytest.mark.skip("no real Db exports"))],
                         ids=lambda p: "/".join(p.parts[-4:-2]) if p else "none")
def test_real_db_call_stacks(db: Path) -> None:
    """Each op's stack as read here with sqlite3 alone, matched by (start, end, name)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        text = dict(conn.execute("SELECT id, value FROM STRING_IDS"))
        rows = [(c, text.get(s), d) for c, s, d in
                conn.execute("SELECT id, stack, stackDepth FROM PYTORCH_CALLCHAINS ORDER BY rowid")]
        api = conn.execute("SELECT A.startNs, A.endNs, A.name, A.callchainId FROM PYTORCH_API AS A "
                           "JOIN ENUM_API_TYPE AS E ON E.id = A.type WHERE E.name = 'op'").fetchall()
    finally:
        conn.close()
    stacks = expected_stacks(rows, with_depth=True)
    want = sorted((int(s), int(e), text[n], stacks.get(c, "")) for s, e, n, c in api)
    ops = _load(db.parents[1]).ops
    got = sorted(zip(ops["start_ns"].tolist(), ops["end_ns"].tolist(), ops["name"], ops["call_stack"]))
    assert got == want
    with_stack = sum(1 for *_, stack in want if stack)
    assert with_stack == len(stacks) == len({c for c, _, _ in rows}) > 300  # one chain per op with a stack
    cells = ops["call_stack"].tolist()
    assert objects(cells) == len(set(cells)) < 40
