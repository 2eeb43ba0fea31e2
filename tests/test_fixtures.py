"""The committed synthetic fixtures: reproducible, detected as the right kind, and shaped like the
real exports (field names, quirks, cross-file links). Expected values come from the designed
workload in fixtures/README.md, recomputed here from the raw files with the standard library only —
no project loader is used, so these tests pin the fixtures, not the code under test.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from perfcmp_core.load.detect import detect

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "fixtures"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OWNED = ("gpu", "gpu_patterns", "gpu_infer", "npu_text", "npu_ms", "npu_db", "npu_infer", "npu_db_patterns",
         "cluster", "npu_variants")
OUT = "ASCEND_PROFILER_OUTPUT"
TS_RE = re.compile(r"^\d{16}\.\d{3}$")
COMPUTE_CORES = {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU"}


# ---------------------------------------------------------------------------------------------
# helpers (independent of the generator and of the loaders)
# ---------------------------------------------------------------------------------------------


def ns(ts: str) -> int:
    """'1736413971400036.943' → integer ns, exactly."""
    return int(Decimal(ts.strip()) * 1000)


def dur_ns(d: float | str) -> int:
    return int(round(Decimal(str(d)) * 1000))


def load_trace(run: Path) -> list[dict]:
    return json.loads((run / OUT / "trace_view.json").read_text(encoding="utf-8"))


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def processes(events: list[dict]) -> dict[str, int]:
    return {e["args"]["name"]: e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}


def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in iv)


def intersect_len(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def all_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for d in OWNED for p in sorted((root / d).rglob("*")) if p.is_file()}


TEXT_RUNS = [FIX / "npu_text" / "base_ascend_pt", FIX / "npu_text" / "comp_ascend_pt",
             FIX / "npu_ms" / "base_ascend_ms", FIX / "npu_ms" / "comp_ascend_ms",
             FIX / "npu_infer" / "dit_vae_ascend_pt", FIX / "npu_infer" / "dit_vae_fa_ascend_pt"]
TORCH_TRAINING = [FIX / "npu_text" / "base_ascend_pt", FIX / "npu_text" / "comp_ascend_pt"]


# ---------------------------------------------------------------------------------------------
# reproducibility and size
# ---------------------------------------------------------------------------------------------


def test_regeneration_is_byte_identical(tmp_path: Path) -> None:
    """`make_fixtures.py --out TMP` reproduces every committed file byte for byte."""
    subprocess.run([sys.executable, str(FIX / "make_fixtures.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    committed, fresh = all_files(FIX), all_files(tmp_path)
    assert sorted(committed) == sorted(fresh)
    for rel, path in committed.items():
        a, b = path.read_bytes(), fresh[rel].read_bytes()
        if rel.endswith(".db") and a[96:100] != b[96:100]:
            # written by another SQLite release (header bytes 96-99): compare the content instead
            dumps = []
            for p in (path, fresh[rel]):
                with sqlite3.connect(p) as conn:
                    dumps.append(list(conn.iterdump()))
            assert dumps[0] == dumps[1], rel
        else:
            assert a == b, f"{rel} differs from a fresh generation (run fixtures/make_fixtures.py)"


def test_committed_fixtures_stay_small() -> None:
    """5.0 MB of single runs with issue 12's real-data patterns, plus 1.2 MB for issue 18's
    4-rank clusters and 1.9 MB for issue 28's format variants (fixtures/README.md)."""
    total = sum(p.stat().st_size for p in all_files(FIX).values())
    assert total < 9 * 1024 * 1024


def test_scale_option_multiplies_the_steps(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(FIX / "make_fixtures.py"), "--out", str(tmp_path), "--scale", "2"],
                   check=True, capture_output=True)
    _, rows = read_csv(tmp_path / "npu_text" / "base_ascend_pt" / OUT / "step_trace_time.csv")
    assert [r["Step"] for r in rows] == [str(i) for i in range(1, 7)]
    _, rows = read_csv(tmp_path / "npu_infer" / "dit_vae_ascend_pt" / OUT / "step_trace_time.csv")
    assert [r["Step"] for r in rows] == [str(i) for i in range(2, 12)]


# ---------------------------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------------------------

DETECT_CASES = [
    ("gpu/base.pt.trace.json", "gpu", "pytorch", "file"),
    ("gpu/comp.pt.trace.json", "gpu", "pytorch", "file"),
    ("gpu/base.pt.trace.json.gz", "gpu", "pytorch", "file"),
    ("npu_text/base_ascend_pt", "npu_text", "pytorch", "profiling"),
    ("npu_text/comp_ascend_pt/ASCEND_PROFILER_OUTPUT", "npu_text", "pytorch", "output"),
    ("npu_text/base_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "npu_text", "pytorch", "trace"),
    ("npu_ms/base_ascend_ms", "npu_text", "mindspore", "profiling"),
    ("npu_ms/comp_ascend_ms", "npu_text", "mindspore", "profiling"),
    ("npu_db/base_ascend_pt", "npu_db", "pytorch", "profiling"),
    ("npu_db/comp_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", "npu_db", "pytorch", "file"),
    ("npu_infer/dit_vae_ascend_pt", "npu_text", "pytorch", "profiling"),
    ("npu_infer/dit_vae_fa_ascend_pt", "npu_text", "pytorch", "profiling"),
]


@pytest.mark.parametrize(("rel", "kind", "framework", "level"), DETECT_CASES)
def test_each_fixture_is_detected_as_its_kind(rel: str, kind: str, framework: str, level: str) -> None:
    src = detect(str(FIX / rel))
    assert (src.kind, src.framework, src.level) == (kind, framework, level)
    if level == "profiling" and kind == "npu_text":
        assert src.missing == [] and src.rank == 0  # every side file and profiler_info_0.json present


# ---------------------------------------------------------------------------------------------
# NPU Text: side files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_kernel_details_columns_and_quirks(run: Path) -> None:
    header, rows = read_csv(run / OUT / "kernel_details.csv")
    sample = DATA / "npu-real" / "kernel_details.a.csv"
    if sample.exists():
        real = sample.read_text(encoding="utf-8").splitlines()[0].split(",")
        if run.name.endswith("_ascend_ms"):
            real[0] = "Step ID"  # MindSpore spells the step column "Step ID"
        assert header == real
    raw = (run / OUT / "kernel_details.csv").read_text(encoding="utf-8").splitlines()[1]
    assert re.search(r',"\d{16}\.\d{3}\t",', raw) and ',"""' in raw  # quoted tab start time, """shapes"""
    for r in rows:
        assert r["Start Time(us)"].endswith("\t") and TS_RE.match(r["Start Time(us)"].strip())
        if r["Accelerator Core"] == "HCCL":
            assert r["Task ID"] == r["Stream ID"] == r["aiv_vec_time(us)"] == r["Input Shapes"] == "N/A"
        elif r["Accelerator Core"] == "AI_CPU":
            assert r["aicore_time(us)"] == r["aiv_vec_time(us)"] == "N/A"
        else:
            assert r["Input Shapes"].startswith('"') and r["Input Shapes"].endswith('"')
            assert float(r["aiv_vec_time(us)"]) >= 0  # a number: the row is "valid" for OverallMetrics
            is_cube = float(r["aicore_time(us)"]) > 0
            assert is_cube == (r["Accelerator Core"] in ("AI_CORE", "MIX_AIC"))


def test_training_text_export_has_every_special_kernel() -> None:
    _, rows = read_csv(FIX / "npu_text" / "base_ascend_pt" / OUT / "kernel_details.csv")
    types = {r["Type"] for r in rows}
    names = {r["Name"] for r in rows}
    cores = {r["Accelerator Core"] for r in rows}
    assert {"FlashAttentionScore", "FlashAttentionScoreGrad", "Conv2D", "Conv2DBackpropFilter", "TransData",
            "PagedAttention", "AllGatherMatmul", "MatMulV2", "MatMulV3", "NonZero"} <= types
    assert "AllGatherMatmul" in names  # exact MC2 kernel name
    assert any(n.startswith("aclnnInplaceCopy") and "TensorMove" in n for n in names)
    assert {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU", "HCCL"} <= cores
    comp_types = {r["Type"] for r in read_csv(FIX / "npu_text" / "comp_ascend_pt" / OUT / "kernel_details.csv")[1]}
    assert "Cast" in comp_types and "Cast" not in types


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_memory_files(run: Path) -> None:
    header, records = read_csv(run / OUT / "memory_record.csv")
    assert header == ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                      "Stream Ptr", "Device Type"]
    assert all(r["Timestamp(us)"].endswith("\t") for r in records)
    assert {"APP"} < {r["Component"] for r in records}
    header, ops = read_csv(run / OUT / "operator_memory.csv")
    assert header[:4] == ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)"] and len(header) == 15
    assert any(r["Release Time(us)"] == "N/A" for r in ops)  # the input batch is never freed in the trace
    for r in ops:
        if r["Release Time(us)"] != "N/A":
            assert ns(r["Release Time(us)"]) > ns(r["Allocation Time(us)"])


def test_cann_memory_rows_fall_inside_a_dequeue() -> None:
    """The reference re-times ``cann::`` rows through the Dequeue event covering their allocation."""
    for run in TORCH_TRAINING:
        ev = load_trace(run)
        deq = [(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in ev if e.get("cat") == "dequeue"]
        cann = [r for r in read_csv(run / OUT / "operator_memory.csv")[1] if "cann::" in r["Name"]]
        assert len(cann) == 6  # one per flash-attention forward (2 layers x 3 steps)
        for r in cann:
            t = ns(r["Allocation Time(us)"])
            assert any(s <= t <= e for s, e in deq)


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_communication_json_has_bandwidth_for_every_step(run: Path) -> None:
    comm = json.loads((run / OUT / "communication.json").read_text(encoding="utf-8"))
    _, steps = read_csv(run / OUT / "step_trace_time.csv")
    assert sorted(comm) == sorted(f"step{r['Step']}" for r in steps)
    for step in comm.values():
        assert step["p2p"] == {}
        bw = step["collective"]["Total Op Info"]["Communication Bandwidth Info"]
        assert {"RDMA", "SDMA"} <= set(bw)
        for link in bw.values():
            assert set(link) == {"Transit Time(ms)", "Transit Size(MB)", "Size Distribution"}
        for name, info in step["collective"].items():
            if name != "Total Op Info":
                assert name.startswith("hcom_") and "@" in name and "Communication Time Info" in info


def test_profiler_metadata_names_the_hccl_groups() -> None:
    for run in TEXT_RUNS:
        meta = json.loads((run / "profiler_metadata.json").read_text(encoding="utf-8"))
        threads = {e["args"]["name"] for e in load_trace(run) if e.get("name") == "thread_name"}
        groups = meta["parallel_group_info"]
        assert groups and all(f"Group {gid} Communication" in threads for gid in groups)
        info = json.loads((run / "profiler_info_0.json").read_text(encoding="utf-8"))
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"


# ---------------------------------------------------------------------------------------------
# NPU Text: trace_view.json
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_trace_view_shape(run: Path) -> None:
    ev = load_trace(run)
    ms = run.name.endswith("_ascend_ms")
    procs = processes(ev)
    assert {"Ascend Hardware", "HCCL", "Overlap Analysis", "CANN", "MindSpore" if ms else "Python"} <= set(procs)
    for e in ev:
        if e["ph"] in ("X", "s", "f"):
            assert isinstance(e["ts"], str) and TS_RE.match(e["ts"]), e
        if e["ph"] == "X":
            host_dur_is_text = ms and e.get("cat") == "cpu_op"
            assert isinstance(e["dur"], str if host_dur_is_text else float), e
    steps = [e["name"] for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) >= 3
    hw = [e for e in ev if e["ph"] == "X" and e["pid"] == procs["Ascend Hardware"]]
    assert all({"Task Type", "Stream Id", "Task Id"} <= set(e["args"]) for e in hw)


def test_torch_trace_view_host_side() -> None:
    ev = load_trace(FIX / "npu_text" / "base_ascend_pt")
    py = processes(ev)["Python"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    assert all(e["pid"] == py for e in ops)
    dims = [e["args"]["Input Dims"] for e in ops if "Input Dims" in e["args"]]
    assert dims and any(";\r\n" in d for d in dims)  # torch_npu widens ';' to ';\r\n'
    frames = {e["name"] for e in ev if e.get("cat") == "python_function"}
    assert "nn.Module: TransformerLayer_0" in frames and "train.py(52): train_step" in frames
    fwdbwd = [e for e in ev if e.get("cat") == "fwdbwd"]
    starts = {e["id"]: e for e in fwdbwd if e["ph"] == "s"}
    ends = {e["id"]: e for e in fwdbwd if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and all(starts[i]["tid"] != ends[i]["tid"] for i in starts)
    # each flow ends on an op with the same "Sequence number" on the autograd thread
    by_start = {(e["tid"], e["ts"]): e for e in ops}
    for i, f in ends.items():
        assert by_start[(f["tid"], f["ts"])]["args"]["Sequence number"] == i
    enq = {e["args"]["correlation_id"] for e in ev if e.get("cat") == "enqueue"}
    deq = {e["args"]["correlation_id"] for e in ev if e.get("cat") == "dequeue"}
    assert enq == deq and len(enq) > 100


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_async_npu_flows_link_launch_ops_to_device_tasks(run: Path) -> None:
    ev = load_trace(run)
    procs = processes(ev)
    dev = {(e["pid"], e["tid"], e["ts"]) for e in ev if e["ph"] == "X"
           and e["pid"] in (procs["Ascend Hardware"], procs["HCCL"])}
    host = {(e["pid"], e["tid"], e["ts"]) for e in ev if e.get("cat") == "cpu_op"}
    flows = [e for e in ev if e.get("cat") == "async_npu"]
    s = {e["id"]: e for e in flows if e["ph"] == "s"}
    f = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert s.keys() == f.keys() and len(s) > 100
    for fid, e in f.items():
        assert (e["pid"], e["tid"], e["ts"]) in dev
        assert (s[fid]["pid"], s[fid]["tid"], s[fid]["ts"]) in host
        assert fid == (e["ts"] if run.name.endswith("_ascend_ms") else ns(e["ts"]))  # id = device ts


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_kernel_details_rows_are_the_compute_tasks_of_the_trace(run: Path) -> None:
    ev = load_trace(run)
    procs = processes(ev)
    hw = {(e["name"], ns(e["ts"]), dur_ns(e["dur"])) for e in ev if e["ph"] == "X"
          and e["pid"] == procs["Ascend Hardware"] and e["args"]["Task Type"] in COMPUTE_CORES}
    hccl_ops = {(e["name"], ns(e["ts"]), dur_ns(e["dur"])) for e in ev if e["ph"] == "X"
                and e["pid"] == procs["HCCL"] and e["name"].startswith("hcom_")}
    _, rows = read_csv(run / OUT / "kernel_details.csv")
    kd = {(r["Name"], ns(r["Start Time(us)"]), dur_ns(r["Duration(us)"])) for r in rows}
    assert kd == hw | hccl_ops


@pytest.mark.parametrize("run", TEXT_RUNS, ids=lambda p: p.name)
def test_overlap_analysis_is_consistent_with_the_device_tasks(run: Path) -> None:
    ev = load_trace(run)
    procs = processes(ev)
    comp = union([(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in ev if e["ph"] == "X"
                  and e["pid"] == procs["Ascend Hardware"] and e["args"]["Task Type"] in COMPUTE_CORES])
    comm = union([(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in ev if e["ph"] == "X"
                  and e["pid"] == procs["HCCL"] and e["name"].startswith("hcom_")])
    lanes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in ev:
        if e["ph"] == "X" and e["pid"] == procs["Overlap Analysis"]:
            lanes[e["name"]].append((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])))
    assert lanes["Computing"] == comp
    assert lanes["Communication"] == comm
    assert length(lanes["Communication(Not Overlapped)"]) == length(comm) - intersect_len(comm, comp)
    # Free = the idle gaps between the first and the last device task of any kind (copies, waits)
    tasks = [(ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])) for e in ev if e["ph"] == "X"
             and e["pid"] in (procs["Ascend Hardware"], procs["HCCL"])]
    span = max(e for _, e in tasks) - min(s for s, _ in tasks)
    assert length(lanes["Free"]) == span - length(union(comp + comm))


def test_hccl_layout_groups_planes_and_rdma_patterns() -> None:
    ev = load_trace(FIX / "npu_text" / "base_ascend_pt")
    hccl = processes(ev)["HCCL"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name" and e["pid"] == hccl}
    order = sorted((e["args"]["sort_index"], e["tid"]) for e in ev
                   if e.get("name") == "thread_sort_index" and e["pid"] == hccl)
    assert set(names) == {tid for _, tid in order}  # every HCCL thread has a sort index
    layout = [names[tid] for _, tid in order]
    assert re.fullmatch(r"Group \S+ Communication", layout[0])
    assert layout == [layout[0], "Plane 0", "Plane 1", layout[3], "Plane 0", "Plane 1"]
    tasks: dict[int, list[str]] = defaultdict(list)
    for e in sorted((e for e in ev if e["ph"] == "X" and e["pid"] == hccl), key=lambda e: ns(e["ts"])):
        tasks[e["tid"]].append(e["name"])
    plane0 = ",".join(tasks[order[1][1]])
    assert "RDMASend,RDMASend,Notify_Wait,RDMASend,Notify_Wait" in plane0  # "RRNR" then N: not a wait


def test_mc2_kernel_has_c_core_sqe_tasks_inside() -> None:
    ev = load_trace(FIX / "npu_text" / "base_ascend_pt")
    hw = [e for e in ev if e["ph"] == "X" and e["pid"] == processes(ev)["Ascend Hardware"]]
    mc2 = [e for e in hw if e["name"] == "AllGatherMatmul"]
    sqe = [e for e in hw if e["name"] == "C_CORE_SQE"]
    assert len(mc2) == 3 and len(sqe) == 12
    assert all(e["args"]["Task Type"] == "C_CORE_SQE" for e in sqe)
    for k in mc2:
        s, e = ns(k["ts"]), ns(k["ts"]) + dur_ns(k["dur"])
        assert sum(s <= ns(t["ts"]) and ns(t["ts"]) + dur_ns(t["dur"]) <= e for t in sqe) == 4


def test_side_stream_copies_and_event_waits() -> None:
    """SDMA copies on the compute stream (counted as SDMA) and on a side stream without compute."""
    ev = load_trace(FIX / "npu_text" / "base_ascend_pt")
    hw = [e for e in ev if e["ph"] == "X" and e["pid"] == processes(ev)["Ascend Hardware"]]
    by_stream: dict[int, set[str]] = defaultdict(set)
    for e in hw:
        by_stream[e["args"]["Stream Id"]].add(e["args"]["Task Type"])
    assert {"SDMA_SQE", "EVENT_WAIT_SQE", "AI_CORE"} <= by_stream[2]
    assert by_stream[5] == {"SDMA_SQE", "EVENT_WAIT_SQE"}
    assert by_stream[9] == {"C_CORE_SQE"}


# ---------------------------------------------------------------------------------------------
# injected differences (base vs comp), from the raw Text export
# ---------------------------------------------------------------------------------------------


def _kd(variant: str) -> list[dict[str, str]]:
    return read_csv(FIX / "npu_text" / f"{variant}_ascend_pt" / OUT / "kernel_details.csv")[1]


def test_injected_differences_in_the_text_pair() -> None:
    base, comp = _kd("base"), _kd("comp")

    def total(rows: list[dict[str, str]], pred) -> int:  # noqa: ANN001
        return sum(dur_ns(r["Duration(us)"]) for r in rows if pred(r))

    qkv = '"3072;4096,1024;1024,3072"'
    assert total(comp, lambda r: r["Input Shapes"] == qkv) - total(base, lambda r: r["Input Shapes"] == qkv) == 90_000
    casts = [r for r in comp if r["Type"] == "Cast"]
    assert len(casts) == 6 and all(r["Name"] == "aclnnCast_CastAiCore_Cast" for r in casts)
    assert Counter(r["Type"] for r in base)["DropOutDoMaskV3"] == 12
    assert Counter(r["Type"] for r in comp)["DropOutDoMaskV3"] == 6
    first_ar = {v: [dur_ns(r["Duration(us)"]) for r in rows if r["Type"] == "hcom_allReduce_"][::2]
                for v, rows in (("base", base), ("comp", comp))}
    assert [c - b for b, c in zip(first_ar["base"], first_ar["comp"])] == [90_000] * 3

    def fa_kb(variant: str) -> float:
        rows = read_csv(FIX / "npu_text" / f"{variant}_ascend_pt" / OUT / "operator_memory.csv")[1]
        return sum(float(r["Size(KB)"]) for r in rows if r["Name"] == "npu::npu_fusion_attention")

    assert fa_kb("comp") - fa_kb("base") == 6 * 16 * 1024


def test_step_time_grows_by_the_designed_amount() -> None:
    """+30 (QKV) +15+15 (Cast fwd/bwd) -12-12 (dropout) = +36 µs of device work per step."""
    def busy(variant: str) -> list[float]:
        return [float(r["Computing"]) for r in read_csv(
            FIX / "npu_text" / f"{variant}_ascend_pt" / OUT / "step_trace_time.csv")[1]]

    deltas = [c - b for b, c in zip(busy("base"), busy("comp"))]
    assert all(abs(d - 36.0) < 1.0 for d in deltas), deltas


# ---------------------------------------------------------------------------------------------
# inference fixtures: designed DiT shares (fixtures/README.md)
# ---------------------------------------------------------------------------------------------


def _dit_shares(run: Path) -> dict[str, float]:
    """Per-category DiT device time and the exposed share of its all-gathers, from the raw files.

    DiT kernels are those of a step that start before its first VAE Conv2D; categories: MatMul
    (MatMulV2/V3), FA (FlashAttentionScore), Vector (AI_VECTOR_CORE), Comm (HCCL).
    """
    _, rows = read_csv(run / OUT / "kernel_details.csv")
    totals: Counter[str] = Counter()
    windows = []
    for step in sorted({r["Step Id"] for r in rows}):
        rs = [r for r in rows if r["Step Id"] == step]
        first_conv = min(ns(r["Start Time(us)"]) for r in rs if r["Type"] == "Conv2D")
        dit = [r for r in rs if ns(r["Start Time(us)"]) < first_conv]
        windows.append((min(ns(r["Start Time(us)"]) for r in dit),
                        max(ns(r["Start Time(us)"]) + dur_ns(r["Duration(us)"]) for r in dit)))
        for r in dit:
            cat = ("comm" if r["Accelerator Core"] == "HCCL" else "matmul" if r["Type"].startswith("MatMul")
                   else "fa" if r["Type"] == "FlashAttentionScore"
                   else "vector" if r["Accelerator Core"] == "AI_VECTOR_CORE" else "other")
            totals[cat] += dur_ns(r["Duration(us)"])
    ev = load_trace(run)
    lanes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in ev:
        if e["ph"] == "X" and e["pid"] == processes(ev)["Overlap Analysis"]:
            lanes[e["name"]].append((ns(e["ts"]), ns(e["ts"]) + dur_ns(e["dur"])))
    all4 = sum(totals.values())
    shares = {k: 100 * v / all4 for k, v in totals.items()}
    shares["exposed"] = 100 * intersect_len(lanes["Communication(Not Overlapped)"], windows) / intersect_len(
        lanes["Communication"], windows)
    return shares


def test_inference_shares_trip_each_advisor_rule_once() -> None:
    a = _dit_shares(FIX / "npu_infer" / "dit_vae_ascend_pt")
    b = _dit_shares(FIX / "npu_infer" / "dit_vae_fa_ascend_pt")
    # designed per block: dit_vae 540/230/150/80 µs, dit_vae_fa 280/330/230/160 µs (of 1000 µs)
    for shares, designed in ((a, {"matmul": 54, "fa": 23, "vector": 15, "comm": 8}),
                             (b, {"matmul": 28, "fa": 33, "vector": 23, "comm": 16})):
        for k, v in designed.items():
            assert abs(shares[k] - v) < 0.2, (k, shares[k])
    assert a.get("other", 0) == b.get("other", 0) == 0
    rules = {"matmul>50": lambda s: s["matmul"] > 50, "fa>30": lambda s: s["fa"] > 30,
             "vector>20": lambda s: s["vector"] > 20, "exposed>30": lambda s: s["exposed"] > 30}
    tripped = {name: [s is a for s in (a, b) if rule(s)] for name, rule in rules.items()}
    assert tripped == {"matmul>50": [True], "fa>30": [False], "vector>20": [False], "exposed>30": [False]}
    assert a["exposed"] < 5 and 55 < b["exposed"] < 65  # designed 0 % and 95/160 = 59.4 %


def test_inference_structure() -> None:
    for run in TEXT_RUNS[4:]:
        ev = load_trace(run)
        steps = [e["name"] for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")]
        assert steps == [f"ProfilerStep#{i}" for i in range(2, 7)]  # 2 untraced warm-up steps, 5 timed
        assert not any(e.get("cat") == "fwdbwd" for e in ev)
        assert not any("Backward" in e["name"] or "Grad" in e["name"] for e in ev if e["ph"] == "X")
        modules = {e["name"].split(": ")[1].rsplit("_", 1)[0] for e in ev
                   if e.get("cat") == "python_function" and e["name"].startswith("nn.Module:")}
        assert {"DiTBlock", "Attention", "AutoencoderKL", "ResnetBlock2D", "Upsample2D", "GroupNorm", "Conv2d"} <= modules
        types = {r["Type"] for r in read_csv(run / OUT / "kernel_details.csv")[1]}
        assert {"FlashAttentionScore", "MatMulV3", "LayerNormV4", "RotaryPositionEmbedding", "Gelu", "Conv2D",
                "GroupNormV2", "UpsampleNearest2d", "hcom_allGather_"} <= types


# ---------------------------------------------------------------------------------------------
# GPU traces
# ---------------------------------------------------------------------------------------------


def _gpu(name: str) -> tuple[str, dict]:
    text = (FIX / "gpu" / name).read_text(encoding="utf-8")
    return text, json.loads(text)


def test_gpu_gzip_copy_is_the_base_trace() -> None:
    assert gzip.decompress((FIX / "gpu" / "base.pt.trace.json.gz").read_bytes()) == (
        FIX / "gpu" / "base.pt.trace.json").read_bytes()


@pytest.mark.parametrize("name", ["base.pt.trace.json", "comp.pt.trace.json"])
def test_gpu_trace_shape(name: str) -> None:
    text, doc = _gpu(name)
    ev = doc["traceEvents"]
    assert re.search(r'"ts": \d{16}\.\d{3}, "dur": \d+\.\d{3}', text)  # ns-resolution µs with 3 decimals
    cats = Counter(e.get("cat") for e in ev)
    for cat in ("cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset", "ac2g",
                "python_function", "fwdbwd", "cpu_instant_event", "gpu_user_annotation"):
        assert cats[cat] > 0, cat
    steps = [e["name"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert any(isinstance(e.get("pid"), str) for e in ev)  # "Spans" / "Traces" / "" trailer events


def test_gpu_launches_link_to_kernels() -> None:
    _, doc = _gpu("base.pt.trace.json")
    ev = doc["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in ev if e.get("name") == "cudaLaunchKernel"}
    device = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert all(e["args"]["correlation"] in launches or e["cat"] != "kernel" for e in device)
    flows_s = {e["id"]: e for e in ev if e.get("cat") == "ac2g" and e["ph"] == "s"}
    flows_f = {e["id"]: e for e in ev if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert flows_s.keys() == flows_f.keys()
    at = {(e["pid"], e["tid"], e["ts"]): e for e in device}
    for fid, f in flows_f.items():
        k = at[(f["pid"], f["tid"], f["ts"])]
        assert k["args"]["correlation"] == fid and f["bp"] == "e"
    ops = [e for e in ev if e.get("cat") == "cpu_op" and "Input Dims" in e["args"]]
    assert ops and all(isinstance(e["args"]["Input Dims"], list) for e in ops)


def test_gpu_nccl_overlaps_compute_partly() -> None:
    _, doc = _gpu("base.pt.trace.json")
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    nccl = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if e["name"].startswith("ncclKernel_AllReduce_RING_LL_Sum")]
    compute = union([(e["ts"], e["ts"] + e["dur"]) for e in kernels if not e["name"].startswith("nccl")])
    assert {e["args"]["stream"] for e in kernels if e["name"].startswith("nccl")}.isdisjoint(
        {e["args"]["stream"] for e in kernels if not e["name"].startswith("nccl")})
    hidden = [intersect_len([iv], compute) / (iv[1] - iv[0]) for iv in nccl]
    assert max(hidden) > 0.99 and min(hidden) < 0.01  # bucket 1 hidden by backward, bucket 2 exposed


def test_gpu_python_frames_fwdbwd_and_memory() -> None:
    _, doc = _gpu("base.pt.trace.json")
    ev = doc["traceEvents"]
    frames = {e["name"] for e in ev if e.get("cat") == "python_function"}
    assert {"nn.Module: TransformerLayer_0", "nn.Module: TransformerLayer_1", "train.py(52): train_step"} <= frames
    s = {e["id"]: e for e in ev if e.get("cat") == "fwdbwd" and e["ph"] == "s"}
    f = {e["id"]: e for e in ev if e.get("cat") == "fwdbwd" and e["ph"] == "f"}
    assert s.keys() == f.keys() and {e["tid"] for e in s.values()}.isdisjoint({e["tid"] for e in f.values()})
    mem = [e for e in ev if e.get("name") == "[memory]"]
    device = [e for e in mem if e["args"]["Device Id"] == 0]
    assert any(e["args"]["Device Id"] == -1 for e in mem)
    live: dict[int, int] = {}
    for e in sorted(device, key=lambda e: e["ts"]):
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        else:
            assert live.pop(a["Addr"]) == -a["Bytes"]  # every free matches its allocation's size
        assert a["Total Reserved"] >= a["Total Allocated"]
    peaks = {n: max(e["args"]["Total Reserved"] for e in _gpu(n)[1]["traceEvents"]
                    if e.get("name") == "[memory]" and e["args"]["Device Id"] == 0)
             for n in ("base.pt.trace.json", "comp.pt.trace.json")}
    assert peaks == {"base.pt.trace.json": 2368 << 20, "comp.pt.trace.json": 2432 << 20}


# ---------------------------------------------------------------------------------------------
# NPU Db
# ---------------------------------------------------------------------------------------------

DB_COLUMNS = {
    "STRING_IDS": {"id", "value"}, "ENUM_API_TYPE": {"id", "name"},
    "PYTORCH_API": {"startNs", "endNs", "connectionId", "name", "inputShapes", "type"},
    "CONNECTION_IDS": {"id", "connectionId"},
    "TASK": {"globalTaskId", "startNs", "endNs", "streamId", "connectionId", "taskType"},
    "COMPUTE_TASK_INFO": {"globalTaskId", "name", "opType", "taskType", "inputShapes"},
    "COMMUNICATION_OP": {"opName", "opId", "opType", "startNs", "endNs", "groupName", "connectionId"},
    "COMMUNICATION_TASK_INFO": {"globalTaskId", "opId", "planeId", "taskType", "groupName"},
    "TASK_PMU_INFO": {"globalTaskId", "name", "value"},
    "MEMORY_RECORD": {"totalReserved", "timestamp"},
    "OP_MEMORY": {"name", "size", "allocationTime", "releaseTime", "duration"},
    "STEP_TIME": {"id", "startNs", "endNs"},
}


@pytest.mark.parametrize("variant", ["base", "comp"])
def test_db_tables_and_links(variant: str) -> None:
    db = FIX / "npu_db" / f"{variant}_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db"
    text_run = FIX / "npu_text" / f"{variant}_ascend_pt"
    with sqlite3.connect(db) as conn:
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        for table, cols in DB_COLUMNS.items():
            assert cols <= {r[1] for r in q(f"PRAGMA table_info({table})")}, table
        assert {r[0] for r in q("SELECT name FROM ENUM_API_TYPE")} >= {"op", "queue", "trace"}
        for table, col in (("TASK", "taskType"), ("COMPUTE_TASK_INFO", "name"), ("COMPUTE_TASK_INFO", "opType"),
                           ("PYTORCH_API", "name"), ("COMMUNICATION_OP", "groupName"), ("OP_MEMORY", "name"),
                           ("COMMUNICATION_TASK_INFO", "taskType"), ("TASK_PMU_INFO", "name")):
            dangling = q(f"SELECT COUNT(*) FROM {table} t LEFT JOIN STRING_IDS s ON t.{col} = s.id "
                         f"WHERE t.{col} IS NOT NULL AND s.id IS NULL")
            assert dangling == [(0,)], (table, col)
        compute = q("SELECT s.value, t.startNs, t.endNs - t.startNs FROM COMPUTE_TASK_INFO c "
                    "JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = c.name")
        _, kd = read_csv(text_run / OUT / "kernel_details.csv")
        assert sorted(compute) == sorted((r["Name"], ns(r["Start Time(us)"]), dur_ns(r["Duration(us)"]))
                                         for r in kd if r["Accelerator Core"] != "HCCL")
        assert q("SELECT COUNT(*) FROM COMMUNICATION_TASK_INFO c LEFT JOIN TASK t "
                 "ON t.globalTaskId = c.globalTaskId WHERE t.globalTaskId IS NULL") == [(0,)]
        assert [r[0] for r in q("SELECT id FROM STEP_TIME ORDER BY id")] == [1, 2, 3]
        # fwdbwd pairs: connection ids shared by exactly two PYTORCH_API rows (how the reference reads them)
        pairs = q("SELECT COUNT(*) FROM (SELECT c.connectionId FROM PYTORCH_API p JOIN CONNECTION_IDS c "
                  "ON p.connectionId = c.id GROUP BY c.connectionId HAVING COUNT(*) = 2)")[0][0]
        flows = sum(1 for e in load_trace(text_run) if e.get("cat") == "fwdbwd" and e["ph"] == "s")
        assert pairs == flows
        # every compute task is reachable from the op that launched it
        unlinked = q("SELECT COUNT(*) FROM COMPUTE_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId "
                     "WHERE t.connectionId NOT IN (SELECT connectionId FROM CONNECTION_IDS)")
        assert unlinked == [(0,)]
        cann = q("SELECT COUNT(*) FROM OP_MEMORY o JOIN STRING_IDS s ON s.id = o.name WHERE s.value LIKE 'cann::%'")
        assert cann == [(6,)]
        assert q("SELECT COUNT(*) FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name "
                 "WHERE s.value = 'aic_total_time' AND p.value > 0") != [(0,)]


# ---------------------------------------------------------------------------------------------
# reference goldens agree with the designed differences (tests/golden/README.md has the commands)
# ---------------------------------------------------------------------------------------------


def _golden(name: str) -> dict:
    return json.loads((REPO / "tests" / "golden" / f"{name}.json").read_text(encoding="utf-8"))


def _overall(doc: dict) -> dict[str, list]:
    return {r[0]: r for r in doc["sheets"]["OverallMetrics"]["rows"]}


@pytest.mark.parametrize("name", ["gpu", "npu_text", "npu_db"])
def test_goldens_show_the_injected_differences(name: str) -> None:
    doc = _golden(name)
    rows = _overall(doc)
    # columns: index, base ms, ratio, number, comp ms, ratio, number, diff ms, diff ratio
    assert rows["\t\tMatmul (Cube)"][7] == 0.09  # +30 µs QKV x 3 steps
    assert abs(rows["E2E Time"][4] - rows["E2E Time"][1] - 0.108) < 0.002  # +36 µs x 3 steps
    comm = doc["sheets"]["CommunicationCompare"]["rows"][0]
    assert comm[15] == 270  # first all-reduce bucket +90 µs x 3
    mem = "2.31G" if name == "gpu" else "2.81G"
    assert mem in doc["terminal"][-3] and ("2.38G" if name == "gpu" else "2.88G") in doc["terminal"][-2]
    if name != "gpu":
        assert rows["\t\tVector (Trans)"][1] == 0 and rows["\t\tVector (Trans)"][6] == 6  # the injected Casts
        fa = next(r for r in doc["sheets"]["MemoryCompareStatistic"]["rows"] if r[1] == "npu::npu_fusion_attention")
        assert fa[8] == 96  # +16 MiB workspace x 6 calls


def test_real_gpu_golden_matches_the_spec_run() -> None:
    rows = _overall(_golden("real_gpu"))
    assert (rows["E2E Time"][1], rows["E2E Time"][4]) == (464.594, 745.239)
    assert (rows["Computing Time"][1], rows["Computing Time"][4]) == (281.336, 548.148)
