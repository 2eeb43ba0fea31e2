"""Which layout of the Ascend outputs a profile was written in (issue 28): ``info`` names the
variants it saw, so a user comparing a January 2025 export with today's knows what differed.

The loaders read every variant below alike (by header name, optional columns, ``N/A`` and
trailing tabs handled in :mod:`.npu_files`); this module only *names* them, reading the header
line of each CSV and the schema of the Db — never the data. Sources (fixtures/README.md,
"Format variants", names the commits):

* torch_npu ``kernel_details.csv`` (``prof_common_func/_csv_headers.py``): ``Step Id`` (only with
  steps), ``Device_id``, …, ``Block Num`` / ``Mix Block Num`` (before: ``Block Dim`` /
  ``Mix Block Dim``); ``blockDim`` / ``gridDim`` are the SIMT thread-block sizes of Ascend 950;
* ``step_trace_time.csv`` with a leading ``Device_id`` (torch_npu) or without (MindSpore); no
  ``Step`` / ``Step ID`` in MindSpore graph mode or without a schedule;
* ``analyse.done`` in ``ASCEND_PROFILER_OUTPUT``: the parse finished;
* Db: ``META_DATA`` schema version, ``ENUM_API_TYPE.name`` declared INTEGER or TEXT,
  ``COMPUTE_TASK_INFO.blockNum`` (before ``blockDim``), ``OVERLAP_ANALYSIS`` (the profiler's own
  overall breakdown), the tables of schema 1.2.0, MindSpore's rank-less
  ``ascend_mindspore_profiler.db`` and its ``communication_analyzer.db``.
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

from .detect import Source
from .npu_files import PMU_MARKERS

#: Tables schema 1.2.0 added (beside OVERLAP_ANALYSIS). The issue's list also names AICORE_FREQ,
#: but the real schema 1.0.0 Db of January 2025 already has it: it marks no variant.
NEW_DB_TABLES = ("CCU", "SIO", "UB", "DPU_TASK")


def _header(path: Path | None) -> tuple[list[str], str]:
    """The stripped header cells and the raw first data line of a CSV ('' when absent)."""
    if path is None or not path.is_file():
        return [], ""
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            head = fh.readline()
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return [], ""  # the reader reports the file itself
    return [c.strip() for c in next(csv.reader([head]), [])], first


def _kernel_details(path: Path | None) -> list[str]:
    cols, first = _header(path)
    if not cols:
        return []
    out = []
    if "Block Num" in cols:
        out.append("kernel_details.csv: Block Num / Mix Block Num (torch_npu 2026-02 and later)")
    elif "Block Dim" in cols:
        out.append("kernel_details.csv: Block Dim / Mix Block Dim (before torch_npu 2026-02)")
    if {"blockDim", "gridDim"} & set(cols):
        out.append("kernel_details.csv: blockDim / gridDim SIMT sizes (Ascend 950)")
    if "Device_id" in cols:
        out.append("kernel_details.csv: Device_id column")
    if not set(PMU_MARKERS) & set(cols):
        out.append("kernel_details.csv: no PMU columns (Level 0)" +
                   (", with shape / dtype / format columns" if "Input Shapes" in cols else ""))
    if not {"Step Id", "Step ID"} & set(cols):
        out.append("kernel_details.csv: no Step Id (no steps, MindSpore graph mode or no schedule)")
    if "\t" in first:
        out.append("CSV time cells with a trailing tab")
    return out


def _step_trace_time(path: Path | None) -> list[str]:
    cols, _ = _header(path)
    if not cols:
        return []
    out = ["step_trace_time.csv: Device_id column" if "Device_id" in cols
           else "step_trace_time.csv: no Device_id column (MindSpore; torch_npu before it added one)"]
    if not {"Step", "Step ID", "Step Id"} & set(cols):
        out.append("step_trace_time.csv: no Step column (MindSpore graph mode or no schedule)")
    return out


def text_variants(src: Source) -> list[str]:
    """The variants of a Text export's files (header lines and marker files only)."""
    out_dir = src.output_dir
    found = []
    if out_dir is not None and (out_dir / "analyse.done").is_file():
        found.append("analyse.done: the parse finished")
    found += _kernel_details(src.files.get("kernel_details"))
    steps = src.files.get("step_trace_time") or (out_dir / "step_trace_time.csv" if out_dir else None)
    found += _step_trace_time(steps)
    return found


def _declared_type(con: sqlite3.Connection, table: str, column: str) -> str:
    for row in con.execute(f'PRAGMA table_info("{table}")'):
        if row[1] == column:
            return str(row[2]).upper()
    return ""


def db_variants(src: Source) -> list[str]:
    """The variants of a Db export: schema version, changed column types and names, new tables,
    MindSpore file names."""
    assert src.db is not None
    found = []
    try:
        con = sqlite3.connect(f"{src.db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "META_DATA" in tables:
                version = dict(con.execute("SELECT name, value FROM META_DATA WHERE name = 'SCHEMA_VERSION'"))
                if version:
                    found.append(f"Db schema {version['SCHEMA_VERSION']}")
            if "ENUM_API_TYPE" in tables:
                found.append(f"ENUM_API_TYPE.name declared {_declared_type(con, 'ENUM_API_TYPE', 'name') or 'untyped'}")
            if "COMPUTE_TASK_INFO" in tables:
                cols = {r[1] for r in con.execute('PRAGMA table_info("COMPUTE_TASK_INFO")')}
                if "blockNum" in cols:
                    found.append("COMPUTE_TASK_INFO.blockNum / mixBlockNum (torch_npu 2026-02 and later)")
                elif "blockDim" in cols:
                    found.append("COMPUTE_TASK_INFO.blockDim / mixBlockDim")
                if {"opState", "hf32Eligible"} <= cols:
                    found.append("COMPUTE_TASK_INFO.opState / hf32Eligible")
            if "OVERLAP_ANALYSIS" in tables:
                enum = "ENUM_OVERLAP_ANALYSIS_TYPE" in tables
                found.append("OVERLAP_ANALYSIS (the profiler's own overall breakdown" +
                             (")" if enum else "; no ENUM_OVERLAP_ANALYSIS_TYPE: types read as 0–3)"))
            new = [t for t in NEW_DB_TABLES if t in tables]
            if new:
                found.append(f"schema 1.2.0 tables: {', '.join(new)}")
        finally:
            con.close()
    except sqlite3.Error:
        return found  # the loader reports an unreadable database
    if src.framework == "mindspore":
        if not src.db.stem[-1:].isdigit():
            found.append(f"{src.db.name}: MindSpore Db without a rank in its name (rank 0 or unset)")
        if (src.db.parent / "communication_analyzer.db").is_file():
            found.append("communication_analyzer.db: MindSpore's communication analysis (not read)")
    if (src.db.parent / "analyse.done").is_file():
        found.append("analyse.done: the parse finished")
    return found
