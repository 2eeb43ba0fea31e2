"""The ``flop_rate`` check: GEMM or attention calls whose achieved FLOP rate is far below their
peers' in the same profile.

A GEMM whose shape the library handles badly (a dimension not a multiple of 16, a vocabulary of
50257, a tiny per-head matrix) runs at a fraction of the rate its neighbours reach on the same
device, dtype and library — comparing within the profile needs no peak-FLOPs table per card.

* **Calls.** A kernel of the classification's ``gemm`` or ``attention`` family belongs to the
  innermost measured host op above its launching op (:data:`.flops.MEASURED_OPS`: ``aten::mm``,
  ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``, the SDPA / flash / efficient attention
  ops and their backward); one call is that op's row, its device time the sum of those kernels
  (copies or fills the op also launched are not GEMM work and are left out). An NPU ``MatMul*``
  / ``BatchMatMul*`` kernel that no such op with recorded shapes claims is a call on its own,
  with its kernel_details / Db input shapes.
* **Work.** FLOPs from the call's shapes (:mod:`.flops`, formulas there); calls whose shapes are
  missing or do not fit are not measured, and the evidence says how much time that leaves out.
* **Groups and peers.** Calls are grouped by (op, shapes); a group's rate is its FLOPs over its
  device time. The peers of a group are the other groups of its family (GEMM or attention):
  their reference is the median of their rates, one vote per group. Not time-weighted: when the
  slow group holds most of the time (the 50257-wide vocabulary GEMMs of a bf16 GPT-2, 77 % of its
  GEMM time on the H200) a time-weighted median is the slow group's own rate and nothing trips.
  A group below ``threshold`` % of its reference trips the check; the headline figure is the
  flagged groups' share of the measured time.
* **Direction** by the slowest-costing flagged group: a dimension not a multiple of 16 → pad /
  align (``direction_align``); under :data:`TINY_FLOPS` a call → batch or fuse the tiny GEMMs
  (``direction_tiny``); fp32 among faster non-fp32 peers → the dtype (``direction_dtype``);
  otherwise the operands' layout (``direction_layout``).

No shapes recorded (``record_shapes=False``) or no family with two groups to compare: the check
says it could not run (:class:`.finding.CheckSkipped`) instead of passing silently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compat import as_text
from ..explain import StepExplanation
from ..model import Profile
from .finding import CheckFinding, CheckSkipped
from .flops import MEASURED_OPS, NPU_GEMM_TYPE, is_fp32, works
from .rules import Check
from .text import ms, pct

#: A call doing less work than this (FLOPs) is a tiny GEMM: launch and tail effects dominate.
TINY_FLOPS = 1e8
_FAMILIES = ("gemm", "attention")
_TOP = 3
TERA = 1e12


def measured_op(profile: Profile, launch: np.ndarray) -> np.ndarray:
    """The innermost measured host op at or above each launching op (-1: none), walking up the
    op tree one level per pass over the kernels still looking."""
    ops = profile.ops
    rows = np.asarray(launch, dtype="int64").copy()
    if len(ops) == 0:
        return np.full(len(rows), -1, dtype="int64")
    codes, names = profile.codes("ops", "name")
    hit = pd.Series(names, dtype=object).isin(MEASURED_OPS).to_numpy(dtype=bool)[codes]
    parent = ops["parent"].to_numpy()
    pending = np.flatnonzero((rows >= 0) & ~hit[np.clip(rows, 0, None)])
    while len(pending):
        rows[pending] = parent[rows[pending]]
        pending = pending[rows[pending] >= 0]
        pending = pending[~hit[rows[pending]]]
    return rows


def calls(profile: Profile, classes: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per measured call: ``op``, ``shapes``, ``family``, ``label``, ``aligned``, ``fp32``,
    ``flops``, ``dur_ns``, ``kernels``; and the GEMM / attention kernel time in all (measured or
    not)."""
    sel = classes[classes["family"].isin(_FAMILIES)]
    total = float(sel["dur_ns"].sum())
    k = profile.kernels
    rows = sel["row"].to_numpy()
    op = measured_op(profile, sel["launch"].to_numpy())
    op_type = k["op_type"].to_numpy(dtype=object)[rows]
    ops = profile.ops
    safe = np.maximum(op, 0)
    empty = np.full(len(op), "", dtype=object)
    if len(ops):
        name = np.where(op >= 0, ops["name"].to_numpy(dtype=object)[safe], empty)
        dims = np.where(op >= 0, ops["input_dims"].to_numpy(dtype=object)[safe], empty)
        types = np.where(op >= 0, ops["input_types"].to_numpy(dtype=object)[safe], empty)
    else:
        name, dims, types = empty, empty.copy(), empty.copy()
    # An NPU MatMul kernel no host op with shapes claims speaks for itself.
    own = ((op < 0) | (dims == "")) & (profile.meta.kind != "gpu") & as_text(op_type).str.match(
        NPU_GEMM_TYPE).to_numpy(dtype=bool)
    name = np.where(own, op_type, name)
    dims = np.where(own, k["input_shapes"].to_numpy(dtype=object)[rows], dims)
    types = np.where(own, k["input_dtypes"].to_numpy(dtype=object)[rows], types)
    call = np.where(own, -2 - rows, op)  # an NPU kernel on its own is a call of its own
    keep = np.flatnonzero(call != -1)
    codes, _ = pd.factorize(call[keep])
    first = keep[np.unique(codes, return_index=True)[1]]  # one row per call, in first-seen order
    dur = sel["dur_ns"].to_numpy()
    per = pd.DataFrame({"op": name[first].astype(object), "shapes": dims[first].astype(object),
                        "types": types[first].astype(object), "own": own[first],
                        "dur_ns": np.bincount(codes, weights=dur[keep], minlength=len(first)).astype("int64"),
                        "kernels": np.bincount(codes, minlength=len(first))})
    w = works(per["op"], per["shapes"], per["own"].to_numpy())
    per = pd.concat([per, w], axis=1)
    per["fp32"] = is_fp32(per["types"])
    per = per[np.isfinite(per["flops"].to_numpy()) & (per["dur_ns"].to_numpy() > 0)]
    return per.reset_index(drop=True), total


def _peer_median(rate: np.ndarray) -> np.ndarray:
    """For each group, the median rate of the *other* groups of its family (NaN alone): one
    vote per (op, shape), so a slow group that holds most of the time cannot set its own
    reference (the vocabulary GEMMs are 77 % of GEMM time in the H200 bf16 GPT-2 trace)."""
    n = len(rate)
    if n < 2:
        return np.full(n, np.nan)
    order = np.argsort(rate, kind="stable")
    s = rate[order]
    rank = np.empty(n, dtype="int64")
    rank[order] = np.arange(n)
    m = n - 1  # the others, sorted: s without position rank

    def other(j: int) -> np.ndarray:
        return np.where(j < rank, s[j], s[np.minimum(j + 1, n - 1)])

    return (other((m - 1) // 2) + other(m // 2)) / 2.0


def groups(per: pd.DataFrame) -> pd.DataFrame:
    """Per (family, op, shapes): calls, device time, FLOPs, rate (FLOP/s), the median rate of the
    other groups of its family (``peer_rate``), how many groups the family has, and the ratio."""
    g = per.groupby(["family", "op", "shapes"], sort=False).agg(
        label=("label", "first"), aligned=("aligned", "first"), fp32=("fp32", "first"),
        calls=("dur_ns", "size"), kernels=("kernels", "sum"), dur_ns=("dur_ns", "sum"),
        flops=("flops", "sum")).reset_index()
    g["rate"] = g["flops"] / (g["dur_ns"] * 1e-9)
    g["peer_rate"] = np.nan
    for _, idx in g.groupby("family", sort=False).indices.items():  # one pass per family (two at most)
        g.loc[g.index[idx], "peer_rate"] = _peer_median(g["rate"].to_numpy()[idx])
    g["peers"] = g.groupby("family")["op"].transform("size")
    g["ratio"] = g["rate"] / g["peer_rate"]
    return g


def _cause(top: pd.Series, fam: pd.DataFrame) -> str:
    if not top["aligned"]:
        return "align"
    if top["flops"] / top["calls"] < TINY_FLOPS:
        return "tiny"
    if top["fp32"] and bool((~fam["fp32"]).any()):
        return "dtype"
    return "layout"


def flop_rate(check: Check, profile: Profile, ex: StepExplanation,
              classes: pd.DataFrame) -> CheckFinding | CheckSkipped | None:
    """GEMM / attention (op, shape) groups far below their family's median rate (module doc)."""
    if classes.empty or not classes["family"].isin(_FAMILIES).any():
        return None
    per, total = calls(profile, classes)
    if per.empty:
        return CheckSkipped("flop_rate", f"no input shapes recorded for the GEMM / attention kernels "
                                         f"({ms(total)}): profile with record_shapes=True")
    g = groups(per)
    g = g[g["peers"] >= 2]
    if g.empty:
        return CheckSkipped("flop_rate", "one (op, shape) group per family: no peers to compare rates with")
    measured = float(g["dur_ns"].sum())
    flagged = g[g["ratio"] * 100 < check.threshold].sort_values("dur_ns", ascending=False, kind="stable")
    if flagged.empty:
        return None
    part = float(flagged["dur_ns"].sum())
    worst = flagged.iloc[0]
    cause = _cause(worst, g[g["family"] == worst["family"]])
    n = max(ex.step_count, 1)
    top = tuple((f"{row['op']} {row['label']}",
                 f"{ms(row['dur_ns'] / n)} (×{row['calls'] / n:g}) at {row['rate'] / TERA:.2f} TFLOP/s vs peers "
                 f"{row['peer_rate'] / TERA:.2f}")
                for _, row in flagged.head(_TOP).iterrows())
    per_step = "per step" if ex.has_steps else "in the whole profile (no steps recorded)"
    return CheckFinding(
        "flop_rate", f"GEMM / attention far below peers: {len(flagged)} op/shape group(s) under "
                     f"{check.threshold:g}% of their peers' median FLOP rate, {pct(part / measured)} of "
                     f"the measured time",
        part / measured, check.threshold, check.direction_for(cause),
        f"{ms(part / n)} {per_step} in {len(flagged)} group(s); {ms(measured)} of {ms(total)} GEMM / attention "
        f"time in the profile measured from shapes in {len(g)} group(s); main cause of the largest: {cause}",
        top, part / n)
