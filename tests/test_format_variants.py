"""Today's Ascend output layouts (issue 28, deliver 1, 3, 4): every variant in
``fixtures/npu_variants`` (fixtures/README.md, "Format variants", names the source each follows)
loads into the same model as the layout it was rewritten from, ``info`` names the variant, and
where a Db holds the profiler's own ``OVERLAP_ANALYSIS`` it is shown beside our figures.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfcmp_core.collect import collect
from perfcmp_core.compare.device_sets import device_sets
from perfcmp_core.info import format_info, profile_info
from perfcmp_core.load import load_profile
from perfcmp_core.model import Profile
from perfcmp_core.options import CompareOptions, LoadOptions
from perfcmp_core.pipeline import comparison_events
from perfcmp_core.request import RunRequest

FIX = Path(__file__).resolve().parents[1] / "fixtures"
VAR = FIX / "npu_variants"
OPTS = LoadOptions(use_cache=False)
REAL_DB = FIX.parents[1] / "shared" / "data" / "npu-real-runs" / "db" / "level1" / "rank0_ascend_pt"


def _load(path: Path) -> Profile:
    p = load_profile(str(path), OPTS)
    p.check()
    return p


def _same_rows(a: pd.DataFrame, b: pd.DataFrame, skip: tuple[str, ...] = ()) -> None:
    cols = [c for c in a.columns if c not in skip]
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))


#: The Triton names the torch_npu 2026 variant gives three kernels (fixtures/gen/variants.py
#: TRITON_NAMES), and the kernel_details (Name, Type) they replace.
TRITON = {"triton_poi_fused_gelu_0": ("aclnnGelu_Gelu_Gelu", "Gelu"),
          "triton_per_fused__log_softmax_1": ("aclnnLogSoftmax_LogSoftmaxV2_LogSoftmaxV2", "LogSoftmaxV2"),
          "triton_unk_fused_zero_2": ("aclnnInplaceZero_ZerosLikeAiCore_ZerosLike", "ZerosLike")}
TORCH_NPU_2026 = VAR / "torch_npu_2026_ascend_pt"


def _untriton(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels with the Triton names put back."""
    out = kernels.copy()
    for new, (name, op_type) in TRITON.items():
        out.loc[out["name"] == new, "name"] = name
        out.loc[out["op_type"] == new, "op_type"] = op_type
    return out


def test_torch_npu_2026_text_reads_as_the_older_layout() -> None:
    """Block Num / Mix Block Num, a Device_id column after Step Id, analyse.done, Triton kernel
    names and host MSTX events: the same model (MSTX is not read: no op, no kernel from it)."""
    new, old = _load(TORCH_NPU_2026), _load(FIX / "npu_text" / "base_ascend_pt")
    _same_rows(_untriton(new.kernels), old.kernels)
    for table in ("ops", "comm_ops", "comm_tasks", "overlap", "steps", "memory", "op_memory"):
        _same_rows(getattr(new, table), getattr(old, table))
    assert new.meta.variants[:3] == ["analyse.done: the parse finished",
                                     "kernel_details.csv: Block Num / Mix Block Num (torch_npu 2026-02 and later)",
                                     "kernel_details.csv: Device_id column"]
    assert "kernel_details.csv: Block Dim / Mix Block Dim (before torch_npu 2026-02)" in old.meta.variants
    assert "  format\n    analyse.done: the parse finished" in format_info(profile_info(new))


def test_mindspore_graph_mode_without_step_ids() -> None:
    """No Step ID in kernel_details.csv, no Device_id / Step in step_trace_time.csv: the kernels
    take their step from the launching op or the step window, the same steps the ids gave."""
    new, old = _load(VAR / "ms_graph_ascend_ms"), _load(FIX / "npu_ms" / "base_ascend_ms")
    _same_rows(new.kernels, old.kernels)
    assert (new.kernels["step"] >= 0).all()
    assert {"kernel_details.csv: no Step Id (no steps, MindSpore graph mode or no schedule)",
            "step_trace_time.csv: no Step column (MindSpore graph mode or no schedule)",
            "step_trace_time.csv: no Device_id column (MindSpore; torch_npu before it added one)"} <= set(new.meta.variants)


def test_mindspore_rankless_db_pairs_with_the_mindspore_text_export() -> None:
    run = VAR / "ms_db_ascend_ms"
    db = _load(run)
    assert (db.meta.kind, db.meta.framework) == ("npu_db", "mindspore")
    assert db.meta.files_used == [str(run / "ASCEND_PROFILER_OUTPUT" / "ascend_mindspore_profiler.db")]
    assert {"ascend_mindspore_profiler.db: MindSpore Db without a rank in its name (rank 0 or unset)",
            "communication_analyzer.db: MindSpore's communication analysis (not read)"} <= set(db.meta.variants)
    text = FIX / "npu_ms" / "base_ascend_ms"
    result = collect(comparison_events(RunRequest.read(str(text), str(run), OPTS, OPTS, CompareOptions())),
                     str(text), str(run))
    assert {"OverallMetrics", "KernelCompare", "OperatorCompare"} <= set(result.tables)
    # one timeline written both ways: the same computing time on both sides
    t, d = device_sets(_load(text)), device_sets(db)
    assert d.compute.length == pytest.approx(t.compute.length, rel=1e-3)


def test_db_schema_1_2_and_its_overlap_analysis_cross_check() -> None:
    run = VAR / "db_1_2_ascend_pt"
    new, old = _load(run), _load(FIX / "npu_db" / "base_ascend_pt")
    for table in ("kernels", "ops", "comm_ops", "comm_tasks", "steps"):
        _same_rows(getattr(new, table), getattr(old, table))
    assert {"Db schema 1.2.0", "COMPUTE_TASK_INFO.blockNum / mixBlockNum (torch_npu 2026-02 and later)",
            "OVERLAP_ANALYSIS (the profiler's own overall breakdown)",
            "schema 1.2.0 tables: CCU, SIO, UB, DPU_TASK"} <= set(new.meta.variants)
    # the profiler's totals per type, read back with sqlite
    with sqlite3.connect(f"file:{run / 'ASCEND_PROFILER_OUTPUT' / 'ascend_pytorch_profiler_0.db'}?mode=ro",
                         uri=True) as con:
        totals = dict(con.execute("SELECT e.name, SUM(o.endNs - o.startNs) FROM OVERLAP_ANALYSIS o "
                                  "JOIN ENUM_OVERLAP_ANALYSIS_TYPE e ON e.id = o.type GROUP BY e.name"))
        lo, hi = con.execute("SELECT MIN(startNs), MAX(endNs) FROM OVERLAP_ANALYSIS").fetchone()
    assert new.meta.profiler_overlap_ns == totals
    rows = {r["type"]: r for r in profile_info(new)["profiler_overlap"]}
    for t in ("COMPUTE", "COMMUNICATION", "COMM_NOT_OVERLAP_COMP"):  # the same busy sets: equal
        assert rows[t]["ours_ms"] == pytest.approx(rows[t]["profiler_ms"], abs=1e-9), t
    # Free: our Db E2E also spans the other device tasks (SDMA, event waits) around the busy time
    ours_e2e = device_sets(new).e2e_ns
    assert rows["FREE"]["ours_ms"] - rows["FREE"]["profiler_ms"] == pytest.approx((ours_e2e - (hi - lo)) / 1e6)
    assert "the profiler's own breakdown (OVERLAP_ANALYSIS) beside ours" in format_info(profile_info(new))


def test_db_with_enum_api_type_name_declared_integer() -> None:
    new, old = _load(VAR / "db_enum_int_ascend_pt"), _load(FIX / "npu_db" / "base_ascend_pt")
    _same_rows(new.ops, old.ops)
    assert len(new.ops) == 705
    assert "ENUM_API_TYPE.name declared INTEGER" in new.meta.variants
    assert "ENUM_API_TYPE.name declared TEXT" in old.meta.variants


@pytest.mark.skipif(not REAL_DB.is_dir(), reason="../shared/data absent")
def test_real_db_overlap_analysis_without_its_enum() -> None:
    """The real January 2025 Db (schema 1.0.0) already holds OVERLAP_ANALYSIS, types 0–3 without
    the enum table: the profiler's Computing and uncovered communication equal ours to the ns."""
    p = load_profile(str(REAL_DB), LoadOptions(use_cache=False, force=True))
    rows = {r["type"]: r for r in profile_info(p)["profiler_overlap"]}
    assert rows["COMPUTE"]["profiler_ms"] == rows["COMPUTE"]["ours_ms"] == pytest.approx(8.903431)
    assert rows["COMM_NOT_OVERLAP_COMP"]["profiler_ms"] == rows["COMM_NOT_OVERLAP_COMP"]["ours_ms"] \
        == pytest.approx(98.071947)
    assert rows["FREE"]["profiler_ms"] == pytest.approx(25.258144)


def test_torch_npu_2026_level0_with_shapes_and_only_its_csv_files() -> None:
    """Level 0 of today's torch_npu keeps shapes, dtypes and formats; arrived without its trace, it
    compares from kernel_details.csv (the incomplete-export path) with the shapes of the csv."""
    p = _load(VAR / "torch_npu_2026_l0_ascend_pt")
    assert not p.meta.has_pmu and p.meta.files_missing[0] == "trace_view"
    assert "kernel_details.csv: no PMU columns (Level 0), with shape / dtype / format columns" in p.meta.variants
    full = _load(FIX / "npu_text" / "base_ascend_pt")
    details = full.kernels[full.kernels["has_details"]].sort_values("start_ns", kind="stable")
    _same_rows(p.kernels[["name", "start_ns", "dur_ns", "input_shapes", "input_dtypes", "step"]],
               details[["name", "start_ns", "dur_ns", "input_shapes", "input_dtypes", "step"]])
    assert (p.kernels["input_shapes"] != "").any()


def test_mindspore_graph_text_and_rankless_db_pair() -> None:
    text, db = VAR / "ms_graph_ascend_ms", VAR / "ms_db_ascend_ms"
    result = collect(comparison_events(RunRequest.read(str(text), str(db), OPTS, OPTS, CompareOptions())),
                     str(text), str(db))
    assert {"OverallMetrics", "KernelCompare", "OperatorCompare"} <= set(result.tables)


def test_triton_kernels_are_classified_by_name_or_launching_op() -> None:
    """torch.compile's Triton kernels (kernel_details Name = Type = the Triton name, AI_VECTOR_CORE):
    pointwise ``triton_poi_`` is element-wise and ``triton_per_`` a reduction by their names; the
    ``triton_unk_`` kernel no name rule knows takes the class of its launching op (aten::zero_:
    copy / cast / memset, as the ZerosLike it replaces). OverallMetrics counts them where it
    counted the kernels they replace (Vector, by their PMU columns), and every kernel table fills."""
    from perfcmp_core.compare.equivalence import builtin_equivalence
    from perfcmp_core.compare.kernel_families import kernel_classes

    new = _load(TORCH_NPU_2026)
    k = new.kernels
    classes = kernel_classes(new, builtin_equivalence())
    names = k["name"].to_numpy()[classes["row"].to_numpy()]
    cls = {n: set(classes["cls"][names == n]) for n in TRITON}
    cls = {n: c.pop() for n, c in cls.items() if len(c) == 1}
    assert cls["triton_poi_fused_gelu_0"] == "element-wise"
    assert cls["triton_per_fused__log_softmax_1"] == "reduction / softmax / sort"
    assert cls["triton_unk_fused_zero_2"] == "copy / cast / memset"
    assert (k.loc[k["name"].str.startswith("triton_"), "task_type"] == "AI_VECTOR_CORE").all()
    assert int(k["name"].str.startswith("triton_").sum()) == 12

    old = FIX / "npu_text" / "base_ascend_pt"
    result = collect(comparison_events(RunRequest.read(str(old), str(TORCH_NPU_2026), OPTS, OPTS, CompareOptions())),
                     str(old), str(TORCH_NPU_2026))
    overall = result.tables["OverallMetrics"].data
    numeric = overall.select_dtypes("number")
    base_cols = [c for c in numeric.columns if c.startswith("base")]
    for col in base_cols:  # both sides hold the same kernels, renamed on one: the same figures
        assert numeric[col].to_numpy() == pytest.approx(numeric["comp" + col[4:]].to_numpy(), nan_ok=True), col
    assert "Vector" in " ".join(overall["index"])
    # KernelCompare groups by op type: each Triton kernel is a row of its own, the comparison's
    kernels = result.tables["KernelCompare"].data.set_index("kernel")
    for new, (_, op_type) in TRITON.items():
        assert kernels.loc[new, "comp_calls"] == kernels.loc[op_type, "base_calls"] > 0
        assert kernels.loc[new, "comp_total"] == pytest.approx(kernels.loc[op_type, "base_total"])
    assert len(result.tables["KernelClassCompare"].data)


def test_mstx_messages_with_escaped_quotes_load_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace's MSTX messages carry JSON-escaped quotes, one of them ``},{`` — the byte pattern
    the piece reader cuts at. A piece cut inside that message is retried at the next boundary:
    the trace read in such pieces gives the profile read whole."""
    import re

    from perfcmp_core.load import npu_trace, pieces

    raw = (TORCH_NPU_2026 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes()
    assert b'"checkpoint \\"epoch 1\\" saved"' in raw
    inner = raw.index(b'{\\"mb\\":0},{') + len(b'{\\"mb\\":0')  # the "}" of "},{" inside the string
    start = raw.index(b"[") + 1
    size = inner - start - 8
    first = re.compile(rb"\}\s*,\s*\{").search(raw, start + size)
    assert first is not None and first.start() == inner  # the first cut falls inside the message
    want = _load(TORCH_NPU_2026)
    with monkeypatch.context() as m:
        m.setattr(npu_trace, "PIECE_BYTES", size)
        m.setattr(pieces, "PIECE_BYTES", size)
        got = _load(TORCH_NPU_2026)
    for table in ("kernels", "ops", "comm_ops", "comm_tasks", "overlap", "steps", "pyfuncs"):
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    assert not any("mstx" in n.lower() or "epoch 1" in n for n in want.ops["name"])
