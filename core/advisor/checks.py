"""Checks beyond the seed's DiT / VAE share rules: what any training or inference step can lose
time to, each with its top contributors and a direction chosen by what dominates.

The seed's rules (:mod:`.rules`) compare category shares inside a stage; these read the step
explanation (:mod:`perfcmp_core.explain`: every nanosecond of a step is compute, exposed
communication or idle with a cause) and the kernel classification, so they hold for any workload:

* ``comm_exposed`` — exposed communication above ``threshold`` % of the step; waiting for peers
  vs transmitting decides the direction, the collectives (``group · collective``) are named;
* ``device_idle`` — the device idle above ``threshold`` % of the step; its main cause (sync, host
  work, launch-bound, copies, device-side) decides the direction;
* ``syncs`` — more than ``threshold`` host-device synchronisations per step, by the op asking;
* ``host_copies`` — host↔device copies above ``threshold`` % of the step;
* ``cast_transdata`` — Cast / TransData (dtype and layout conversion) kernels above
  ``threshold`` % of device compute;
* ``aicpu`` — NPU AI CPU tasks above ``threshold`` % of device compute;
* ``flop_rate`` — GEMM / attention (op, shape) groups whose achieved FLOP rate is under
  ``threshold`` % of their family's time-weighted median (:mod:`.flop_rate`); without recorded
  shapes it says it could not run (:class:`.finding.CheckSkipped`).

Thresholds and directions live in ``advisor.ini``'s ``[check.*]`` sections (``direction`` or,
for the first two, ``direction_<cause>``). A profile without steps is read as one window: its
figures are totals, and are said to be.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from ..compat import as_text, factorize_text
from ..explain import StepExplanation
from ..explain.idle import CAUSES as IDLE_CAUSES
from ..explain.table import means
from ..explain.host import SYNC_CALL
from ..model import Profile
from .finding import CheckFinding, CheckSkipped
from .flop_rate import flop_rate
from .rules import CHECKS, AdvisorConfig, Check
from .text import ms, pct
#: The explanation's parts (core/explain).
_COMM, _IDLE, _COMPUTE = "communication", "idle", "compute"
#: Dtype / layout conversion kernels: the NPU op types, torch_npu's cast op.
_CAST = re.compile(r"^(?:cast|transdata)(?:[^a-z]|$)|npu_dtype_cast", re.IGNORECASE)
_AICPU = "AI_CPU"
_TOP = 3


def _per(ex: StepExplanation) -> str:
    return "per step" if ex.has_steps else "in the whole profile (no steps recorded)"


def _of_step(ex: StepExplanation) -> str:
    return "of the step" if ex.has_steps else "of the profile"


def _top_labels(labels: dict[str, float]) -> tuple[tuple[str, str], ...]:
    items = sorted(labels.items(), key=lambda kv: -kv[1])[:_TOP]
    return tuple((label, ms(ns)) for label, ns in items if ns > 0)


def _comm_exposed(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    m = means(ex)
    comm = m.parts.get(_COMM, 0.0)
    if m.total <= 0 or comm / m.total * 100 <= check.threshold:
        return None
    wait, transmit = m.causes.get((_COMM, "wait"), 0.0), m.causes.get((_COMM, "transmit"), 0.0)
    labels: dict[str, float] = {}
    for (part, _), by_label in m.labels.items():
        if part == _COMM:
            for label, ns in by_label.items():
                labels[label] = labels.get(label, 0.0) + ns
    if wait or transmit:
        split = f"waiting for peers {ms(wait)} ({pct(wait / comm)}) vs transmitting {ms(transmit)}"
        direction = check.direction_for("wait" if wait >= transmit else "transmit")
    else:
        split = "the trace does not split waiting from transmitting"
        direction = check.direction_for("")
    return CheckFinding(
        "comm_exposed", f"Exposed communication: {pct(comm / m.total)} {_of_step(ex)} > {check.threshold:g}%",
        comm / m.total, check.threshold, direction,
        f"{ms(comm)} exposed {_per(ex)} of {ms(m.total)}; {split}", _top_labels(labels), comm)


def _device_idle(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    m = means(ex)
    idle = m.parts.get(_IDLE, 0.0)
    if m.total <= 0 or idle / m.total * 100 <= check.threshold:
        return None
    causes = {c: m.causes.get((_IDLE, c), 0.0) for c in IDLE_CAUSES}
    main = max(causes, key=lambda c: causes[c])
    listed = "; ".join(f"{c} {ms(ns)}" for c, ns in sorted(causes.items(), key=lambda kv: -kv[1]) if ns > 0)
    return CheckFinding(
        "device_idle", f"Device idle: {pct(idle / m.total)} {_of_step(ex)} > {check.threshold:g}% "
                       f"(main cause: {main}, {pct(causes[main] / idle)} of the idle time)",
        idle / m.total, check.threshold, check.direction_for(main),
        f"{ms(idle)} idle {_per(ex)} of {ms(m.total)}; by cause: {listed}",
        _top_labels(m.labels.get((_IDLE, main), {})), idle)


def _windows(ex: StepExplanation) -> tuple[np.ndarray, np.ndarray]:
    w = ex.windows
    return w["start_ns"].to_numpy(), w["end_ns"].to_numpy()


def _in_windows(ex: StepExplanation, t: np.ndarray) -> np.ndarray:
    """Which times fall inside a window of the explanation."""
    start, end = _windows(ex)
    i = np.searchsorted(start, t, side="right") - 1
    ok = i >= 0
    ok[ok] = t[ok] < end[i[ok]]
    return ok


def _syncs(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    ops = profile.ops
    if len(ops) == 0 or ex.step_count == 0:
        return None
    codes, names = profile.codes("ops", "name")
    is_sync = pd.Series(names, dtype=object).str.contains(SYNC_CALL).to_numpy(dtype=bool)[codes]
    rows = np.flatnonzero(is_sync & _in_windows(ex, ops["start_ns"].to_numpy()))
    per_step = len(rows) / ex.step_count
    if per_step <= check.threshold:
        return None
    parent = ops["parent"].to_numpy()[rows]
    asking = np.where(parent >= 0, ops["name"].to_numpy(dtype=object)[np.maximum(parent, 0)],
                      ops["name"].to_numpy(dtype=object)[rows])
    counts = pd.Series(asking, dtype=object).value_counts().head(_TOP)
    waited = means(ex).causes.get((_IDLE, "sync"), 0.0)
    return CheckFinding(
        "syncs", f"Host-device syncs: {per_step:g} {_per(ex)} > {check.threshold:g}",
        per_step, check.threshold, check.direction_for(""),
        f"{len(rows)} sync calls in {ex.step_count} window(s); device idle waiting on syncs {ms(waited)} {_per(ex)}",
        tuple((str(k), f"×{v / ex.step_count:g}") for k, v in counts.items()), waited)


def _host_copies(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    from ..explain.device import copy_kinds

    k = profile.kernels
    m = means(ex)
    copies = np.flatnonzero(np.isin(k["task_type"].to_numpy(dtype=object),
                                    ["gpu_memcpy", "PCIE_DMA_SQE", "MEMCPY_ASYNC"]))
    copies = copies[_in_windows(ex, k["start_ns"].to_numpy()[copies])]
    if m.total <= 0 or not len(copies):
        return None
    op_row = k["op_row"].to_numpy()[copies]
    names = profile.ops["name"].to_numpy(dtype=object)
    op_names = np.where(op_row >= 0, names[np.maximum(op_row, 0)] if len(names) else "", "").astype(object)
    labels, _ = copy_kinds(profile, copies, op_names)
    host = np.array([str(x).startswith(("H2D", "D2H", "host-device")) for x in labels], dtype=bool)
    dur = k["dur_ns"].to_numpy()[copies][host].astype("float64") / ex.step_count
    total = float(dur.sum())
    if total / m.total * 100 <= check.threshold:
        return None
    top = pd.Series(dur).groupby(pd.Series(labels[host], dtype=object)).agg(["sum", "size"])
    top = top.sort_values("sum", ascending=False).head(_TOP)
    return CheckFinding(
        "host_copies", f"Host-device copies: {pct(total / m.total)} {_of_step(ex)} > {check.threshold:g}%",
        total / m.total, check.threshold, check.direction_for(""),
        f"{int(host.sum())} copies, {ms(total)} {_per(ex)}; device idle waiting on copies "
        f"{ms(m.causes.get((_IDLE, 'copy'), 0.0))}",
        tuple((str(label), f"{ms(row['sum'])} (×{row['size'] / ex.step_count:g})") for label, row in top.iterrows()),
        total)


def _compute_share(check: Check, key: str, what: str, classes: pd.DataFrame, hit: np.ndarray,
                   ex: StepExplanation) -> CheckFinding | None:
    compute = classes["cls"].to_numpy(dtype=object) != "communication"
    total = float(classes["dur_ns"].to_numpy()[compute].sum())
    sel = hit & compute
    part = float(classes["dur_ns"].to_numpy()[sel].sum())
    if total <= 0 or part / total * 100 <= check.threshold:
        return None
    top = classes[sel].groupby("kernel")["dur_ns"].agg(["sum", "size"]).sort_values("sum", ascending=False).head(_TOP)
    n = max(ex.step_count, 1)
    return CheckFinding(
        key, f"{what}: {pct(part / total)} of device compute > {check.threshold:g}%",
        part / total, check.threshold, check.direction_for(""),
        f"{int(sel.sum())} kernels, {ms(part)} of {ms(total)} compute in the profile",
        tuple((str(label), f"{ms(row['sum'])} (×{row['size']})") for label, row in top.iterrows()), part / n)


def _cast_transdata(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    if classes.empty:
        return None
    kernel = classes["kernel"].astype(object)
    launch = classes["launch"].to_numpy()
    names = profile.ops["name"].to_numpy(dtype=object)
    op = np.where(launch >= 0, names[np.maximum(launch, 0)] if len(names) else "", "").astype(object)
    codes, uniq = factorize_text(np.concatenate([kernel.to_numpy(dtype=object), op]))
    hit_u = as_text(uniq).str.contains(_CAST).to_numpy(dtype=bool)
    hit = hit_u[codes]
    hit = hit[: len(kernel)] | hit[len(kernel):]
    return _compute_share(check, "cast_transdata", "Cast / TransData", classes, hit, ex)


def _aicpu(check: Check, profile: Profile, ex: StepExplanation, classes: pd.DataFrame) -> CheckFinding | None:
    if profile.meta.kind == "gpu" or classes.empty:
        return None
    k = profile.kernels
    rows = classes["row"].to_numpy()
    hit = (k["task_type"].to_numpy(dtype=object)[rows] == _AICPU) | (k["core"].to_numpy(dtype=object)[rows] == _AICPU)
    return _compute_share(check, "aicpu", "AI CPU tasks", classes, hit, ex)


_RUN: dict[str, Callable[[Check, Profile, StepExplanation, pd.DataFrame], CheckFinding | CheckSkipped | None]] = {
    "comm_exposed": _comm_exposed, "device_idle": _device_idle, "syncs": _syncs,
    "host_copies": _host_copies, "cast_transdata": _cast_transdata, "aicpu": _aicpu, "flop_rate": flop_rate,
}


def check_profile(profile: Profile, ex: StepExplanation, classes: pd.DataFrame,
                  cfg: AdvisorConfig) -> tuple[list[CheckFinding], list[CheckSkipped]]:
    """The enabled checks of ``cfg`` that trip on ``profile`` and those that could not run on it,
    each in :data:`CHECKS` order."""
    found: list[CheckFinding] = []
    skipped: list[CheckSkipped] = []
    for key in CHECKS:
        check = cfg.checks.get(key)
        if check is not None:
            result = _RUN[key](check, profile, ex, classes)
            if isinstance(result, CheckSkipped):
                skipped.append(result)
            elif result is not None:
                found.append(result)
    return found, skipped


def run_checks(profile: Profile, ex: StepExplanation, classes: pd.DataFrame, cfg: AdvisorConfig) -> list[CheckFinding]:
    """The enabled checks of ``cfg`` that trip on ``profile``, in :data:`CHECKS` order."""
    return check_profile(profile, ex, classes, cfg)[0]
