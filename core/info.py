"""``perfcmp-tui info PATH``: what a profile holds and which comparisons it can feed.

Users usually discover that a profile lacks memory or call stacks only after a comparison comes out
empty; ``info`` says it up front, and says how to collect what is missing.
"""

from __future__ import annotations

from typing import Any

from .device_time import DeviceTime, device_time, format_device_time
from .load.detect import ENABLES, TEXT_FILES
from .model import Profile
from .notes import lines

_FILE_NAMES = {**TEXT_FILES, "trace_view": "trace_view.json", "profiler_info": "profiler_info*.json",
               "profiler_metadata": "profiler_metadata.json"}


def profile_info(profile: Profile) -> dict[str, Any]:
    """A JSON-ready description of a loaded profile."""
    m = profile.meta
    k = profile.kernels
    steps = [
        {"step": int(r.step), "start_us": r.start_ns / 1000.0, "end_us": r.end_ns / 1000.0,
         "duration_ms": (r.end_ns - r.start_ns) / 1e6}
        for r in profile.steps.itertuples(index=False)
    ]
    dt = device_time(profile)
    counts = {
        "host_ops": int(len(profile.ops)),
        "kernels": dt.linked_tasks + dt.unlinked_tasks,
        "kernel_details_rows": int(k["has_details"].sum()),
        "kernels_linked_to_ops": dt.linked_tasks,
        "comm_ops": int(len(profile.comm_ops)),
        "comm_tasks": int(len(profile.comm_tasks)),
        "comm_groups": int(profile.comm_ops["group"].replace("", None).dropna().nunique()),
        "memory_records": int(len(profile.memory)),
        "op_allocations": int(len(profile.op_memory)),
        "python_functions": int(len(profile.pyfuncs)),
        "modules": int(profile.pyfuncs["is_module"].sum()),
    }
    missing = [
        {"file": _FILE_NAMES.get(role, role), "disables": ENABLES.get(role, "")}
        for role in m.files_missing
    ]
    return {
        "path": m.source,
        "kind": m.kind,
        "label": m.label,
        "framework": m.framework,
        "export": m.export,
        "level": m.level,
        "rank": m.rank,
        "device": m.device,
        "profiler_level": m.profiler_level or None,
        "with_stack": m.with_stack,
        "profile_memory": m.profile_memory,
        "record_shapes": m.record_shapes,
        "selected_step": m.selected_step,
        "steps": steps,
        "counts": counts,
        "device_time": dt.to_json(),
        "device_time_detail": dt.detail_json(),
        "files_used": list(m.files_used),
        "files_missing": missing,
        "notes": lines(m.notes),
        "comparisons": comparisons_available(profile),
        "variants": list(m.variants),
        "profiler_overlap": profiler_cross_check(profile),
    }


#: Our figure beside each OVERLAP_ANALYSIS type of the profiler.
_CROSS_CHECK = (("COMPUTE", "Computing"), ("COMMUNICATION", "Communication"),
                ("COMM_NOT_OVERLAP_COMP", "Uncovered Communication"), ("FREE", "Free"))


def profiler_cross_check(profile: Profile) -> list[dict[str, Any]]:
    """Our Computing / Communication / Uncovered Communication / Free (ms, the OverallMetrics
    busy sets) next to the profiler's own ``OVERLAP_ANALYSIS`` totals, where the Db has them.
    Free is E2E minus Computing and uncovered communication on both sides (the profiler's E2E:
    the sum of its COMPUTE, COMM_NOT_OVERLAP_COMP and FREE spans)."""
    theirs = profile.meta.profiler_overlap_ns
    if not theirs:
        return []
    from .compare.device_sets import device_sets

    sets = device_sets(profile)
    ours = {"COMPUTE": sets.compute.length, "COMMUNICATION": sets.communication.length,
            "COMM_NOT_OVERLAP_COMP": sets.uncovered.length,
            "FREE": sets.e2e_ns - sets.compute.length - sets.uncovered.length}
    return [{"figure": label, "type": t, "profiler_ms": theirs.get(t, 0) / 1e6, "ours_ms": ours[t] / 1e6}
            for t, label in _CROSS_CHECK if t in theirs]


def comparisons_available(profile: Profile) -> dict[str, str]:
    """Each comparison → "yes" or the reason it will be empty for this profile."""
    m = profile.meta
    k = profile.kernels
    out: dict[str, str] = {}
    out["overall"] = "yes" if (k["in_trace"].any() or not profile.overlap.empty) else \
        "no device kernels"
    out["operators"] = "yes" if not profile.ops.empty else "no host ops (cpu_op events)"
    out["modules"] = "yes" if profile.pyfuncs["is_module"].any() else \
        "no nn.Module python_function events: collect with with_stack=True"
    out["communication"] = "yes" if not profile.comm_ops.empty else "no communication ops"
    out["memory"] = ("no per-op memory records: collect with profile_memory=True" if profile.op_memory.empty
                     else "yes" if not profile.ops.empty
                     else "yes, by the records' own operator names (no host ops to attribute them to)")
    out["kernels"] = "yes" if (m.is_npu and k["has_details"].any()) else (
        "GPU traces carry no kernel details" if not m.is_npu else "no kernel_details rows")
    out["api"] = "yes" if not profile.ops.empty else "no host ops"
    return out


def format_info(info: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`profile_info`."""
    lines = [f"{info['path']}"]
    kind = info["label"]
    lines.append(f"  kind        {kind} · export {info['export']} · level {info['level'] or '-'}")
    lines.append(f"  framework   {info['framework'] or 'unknown'}"
                 + (f" · profiler {info['profiler_level']}" if info["profiler_level"] else ""))
    lines.append(f"  rank/device {_opt(info['rank'])} / {_opt(info['device'])}")
    flags = ", ".join(f"{k}={_opt(info[k])}" for k in ("with_stack", "profile_memory", "record_shapes"))
    lines.append(f"  collected   {flags}")
    steps = info["steps"]
    if steps:
        lines.append(f"  steps       {len(steps)}" + (f" (selected: {info['selected_step']})"
                                                    if info["selected_step"] is not None else ""))
        origin = steps[0]["start_us"]
        for s in steps:
            lines.append(f"    #{s['step']:<6} {s['duration_ms']:10.3f} ms  "
                         f"[{(s['start_us'] - origin) / 1000:+.3f} → "
                         f"{(s['end_us'] - origin) / 1000:+.3f} ms]")
    else:
        lines.append("  steps       none (no ProfilerStep#N markers)")
    lines.append("  counts")
    for key, val in info["counts"].items():
        lines.append(f"    {key.replace('_', ' '):<22} {val:>10,}")
    lines.append("  device time")
    dt = DeviceTime.from_json(info["device_time"], info["device_time_detail"])
    lines.extend(f"    {line}" for line in format_device_time(dt, info["kind"]))
    if info.get("variants"):
        lines.append("  format")
        lines.extend(f"    {v}" for v in info["variants"])
    if info.get("profiler_overlap"):
        lines.append("  the profiler's own breakdown (OVERLAP_ANALYSIS) beside ours, ms")
        for row in info["profiler_overlap"]:
            lines.append(f"    {row['figure']:<24} {row['profiler_ms']:12.3f}  ours {row['ours_ms']:12.3f}"
                         f"  ({row['ours_ms'] - row['profiler_ms']:+.3f})")
    if info["files_used"]:
        lines.append("  files used")
        lines.extend(f"    {f}" for f in info["files_used"])
    if info["files_missing"]:
        lines.append("  files missing")
        lines.extend(f"    {f['file']:<24} → no {f['disables']}" for f in info["files_missing"])
    if info.get("step_time"):  # `info` adds the step explanation (the pipeline's profile_info does not)
        from .explain.table import format_side

        lines.extend(f"  {line}" for line in format_side(info["step_time"]))
    lines.append("  comparisons")
    for key, val in info["comparisons"].items():
        lines.append(f"    {key:<14} {val}")
    if info["notes"]:
        lines.append("  notes")
        lines.extend(f"    {n}" for n in info["notes"])
    return "\n".join(lines)


def _opt(v: object) -> str:
    return "unknown" if v is None else str(v)
