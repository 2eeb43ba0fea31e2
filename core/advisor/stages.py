"""Which inference stage (DiT, VAE …) each piece of device work belongs to.

Two methods, tried in this order (docs/advisor.md):

1. **Names.** A work item's launching host op sits inside ``nn.Module`` frames (``python_function``
   events, ``with_stack=True``), carries a ``Call stack`` (NPU), or — MindSpore — names its cell
   scope. The *outermost* module / frame / scope element matching a stage's ``names`` decides, so
   a VAE's attention block stays VAE and a text encoder pinned to ``Other`` keeps its inner
   transformer out of DiT. When names identify any real stage they are authoritative: items they
   do not place are ``Other`` — except work inside an *opaque* wrapper module (``opaque_modules``:
   torch.compile's ``OptimizedModule`` hides the modules of the model it wraps), which the kernel
   region method places.
2. **Kernel regions** — a guess, said to be one: only for inference profiles (no backward work)
   without such names, and only where the workload (:mod:`.workload`) is diffusion or unknown. Each
   stage-typical kernel votes for its stage; the vote is smoothed by a centred majority over
   ``region_window`` neighbouring votes, runs shorter than ``region_min_kernels`` votes are
   absorbed by the run before them, and a run becomes a stage only if it contains one of the
   stage's ``require`` kernels (DiT: attention; VAE: GroupNorm / Upsample). Other items take the
   stage of the region they sit in (the last vote before them in their step, else the first after).

Time no method attributes is ``Other``; it is never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import Profile
from ..timeline import innermost, thread_key
from .items import Items, climb
from .rules import AdvisorConfig, Keywords
from .workload import INFERENCE, Workload, stage_guess_note


@dataclass(frozen=True)
class StageAssignment:
    """The stage code of every work item, and how the stages were found."""

    codes: np.ndarray  # per item: index into cfg.stage_names (last = Other)
    method: str  # "module names" | "call stacks" | "MindSpore scopes" | "kernel regions" | ""
    note: str  # one line: how stages were found, or why there are none


def is_training(profile: Profile, items: Items, cfg: AdvisorConfig) -> str:
    """An example of backward / optimizer work when the profile has any (forward-backward flows,
    host ops or device items matching ``[training] markers``), else ``""``."""
    if len(profile.fwdbwd):
        return "forward→backward flows"
    names = pd.Series(pd.unique(profile.ops["name"].to_numpy(dtype=object)), dtype=object)
    hit = cfg.training.matches(names.str.lower())
    if hit.any():
        return str(names[hit].iloc[0])
    hit = cfg.training.matches(items.text)
    if hit.any():
        return str(items.text[hit].iloc[0]).split(" | ")[0]
    return ""


def _alternation(specs: list[tuple[int, Keywords]]) -> re.Pattern[str] | None:
    """``(?P<s0>…)|(?P<s1>…)`` over the non-empty lists; the group name carries the stage code."""
    parts = [f"(?P<s{code}>{kw.source})" for code, kw in specs if kw.pattern is not None]
    return re.compile("|".join(parts), re.IGNORECASE | re.DOTALL) if parts else None


def _which(texts: pd.Series, pattern: re.Pattern[str] | None, last: bool) -> np.ndarray:
    """Stage code of the first (``last``: last) match in each distinct text, -1 for none."""
    out = np.full(len(texts), -1, dtype="int64")
    if pattern is None or texts.empty:
        return out
    regex = re.compile(r"^.*(?:" + pattern.pattern + ")", pattern.flags) if last else pattern
    found = texts.str.extract(regex, expand=True)
    for col in found.columns:
        if isinstance(col, str) and re.fullmatch(r"s\d+", col):
            hit = found[col].notna().to_numpy() & (out < 0)
            out[hit] = int(col[1:])
    return out


def _module_stages(profile: Profile, op_row: np.ndarray, pattern: re.Pattern[str] | None,
                   opaque: Keywords) -> tuple[np.ndarray, np.ndarray]:
    """Per item: the stage of the outermost stage-named ``nn.Module`` frame around its launching
    op (-1: none), and whether an opaque wrapper module (``opaque_modules``) encloses it."""
    pf = profile.pyfuncs
    out = np.full(len(op_row), -1, dtype="int64")
    hidden = np.zeros(len(op_row), dtype=bool)
    if not pf["is_module"].any() or (pattern is None and opaque.pattern is None):
        return out, hidden
    is_module = pf["is_module"].to_numpy()
    codes, distinct = profile.codes("pyfuncs", "name")
    names = pd.Series(distinct, dtype=object)
    own = _which(names, pattern, last=False)[codes]
    own[~is_module] = -1
    wraps = opaque.matches(names.str.lower())[codes] & is_module
    # Outermost wins: a frame inherits the decided stage (and the wrapper) of its parent, level by level.
    parent = pf["parent"].to_numpy()
    depth = pf["depth"].to_numpy()
    eff, inside = own.copy(), wraps.copy()
    for d in range(1, int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == d)
        par = parent[rows]
        ok = par >= 0
        inherited = np.full(len(rows), -1, dtype="int64")
        inherited[ok] = eff[par[ok]]
        eff[rows] = np.where(inherited >= 0, inherited, own[rows])
        inside[rows[ok]] |= inside[par[ok]]
    linked = op_row >= 0
    ops = profile.ops
    rows = op_row[linked]
    frame = innermost(
        thread_key(pf["pid"].to_numpy(), pf["tid"].to_numpy()), pf["start_ns"].to_numpy(),
        pf["end_ns"].to_numpy(), parent,
        thread_key(ops["pid"].to_numpy()[rows], ops["tid"].to_numpy()[rows]), ops["start_ns"].to_numpy()[rows],
        strict=False,
    )
    at = frame >= 0
    found = np.full(len(rows), -1, dtype="int64")
    found[at] = eff[frame[at]]
    wrapped = np.zeros(len(rows), dtype=bool)
    wrapped[at] = inside[frame[at]]
    out[linked] = found
    hidden[linked] = wrapped
    return out, hidden


def _stack_rows(profile: Profile, op_row: np.ndarray) -> np.ndarray:
    """The nearest op (the launching op or an ancestor) that carries a call stack, -1 for none."""
    ops = profile.ops
    has = ops["call_stack"].to_numpy(dtype=object) != ""
    if not has.any():
        return np.full(len(op_row), -1, dtype="int64")
    return climb(op_row, ops["parent"].to_numpy(), has)


def _text_stages(profile: Profile, column: str, rows: np.ndarray, pattern: re.Pattern[str] | None,
                 last: bool) -> np.ndarray:
    """Stage of the outermost match in ``ops.<column>`` of op ``rows`` (-1 rows and misses → -1),
    each distinct text matched once."""
    out = np.full(len(rows), -1, dtype="int64")
    linked = rows >= 0
    if pattern is None or not linked.any():
        return out
    codes, distinct = profile.codes("ops", column)
    used, back = np.unique(codes[rows[linked]], return_inverse=True)
    out[linked] = _which(pd.Series(distinct[used], dtype=object), pattern, last)[back.ravel()]
    return out


def _by_names(profile: Profile, items: Items, cfg: AdvisorConfig) -> tuple[np.ndarray, str, np.ndarray]:
    """Stage per item from module / call-stack / scope names (-1: no name decides), the method,
    and which items sit inside an opaque wrapper module."""
    other = len(cfg.stages)
    pattern = _alternation([*enumerate(s.names for s in cfg.stages), (other, cfg.other_names)])
    op_row = items.frame["op_row"].to_numpy()
    codes, hidden = _module_stages(profile, op_row, pattern, cfg.opaque_modules)
    method = "module names"
    if not (codes[(codes >= 0)] < other).any():
        stack_rows = _stack_rows(profile, op_row)
        # Call stacks list the innermost frame first, so the outermost match is the last one.
        stacks = _text_stages(profile, "call_stack", stack_rows, pattern, last=True)
        codes = np.where(codes >= 0, codes, stacks)
        method = "call stacks"
    if not (codes[(codes >= 0)] < other).any() and profile.meta.framework == "mindspore":
        # Scopes run outermost first: Default/network/…/0-TransformerLayer/MatMul-op12.
        scopes = _text_stages(profile, "name", items.frame["host_row"].to_numpy(), pattern, last=False)
        codes = np.where(codes >= 0, codes, scopes)
        method = "MindSpore scopes"
    return codes, method, hidden & (codes < 0)


def _runs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and stop (exclusive) positions of runs of equal values."""
    if len(labels) == 0:
        return np.empty(0, dtype="int64"), np.empty(0, dtype="int64")
    change = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    starts = np.concatenate([[0], change])
    stops = np.concatenate([change, [len(labels)]])
    return starts, stops


def _by_regions(items: Items, cfg: AdvisorConfig, free: np.ndarray) -> np.ndarray:
    """Stage per item from contiguous regions of stage-typical kernels (-1: none)."""
    n_stages = len(cfg.stages)
    text = items.text
    votes_distinct = np.full(len(text), -1, dtype="int64")
    require = np.zeros((len(text), n_stages), dtype=bool)
    for s, spec in reversed(list(enumerate(cfg.stages))):  # earlier stages win ties of keywords
        votes_distinct[spec.kernels.matches(text)] = s
        require[:, s] = spec.require.matches(text) if spec.require.pattern is not None else True
    is_comm = items.frame["is_comm"].to_numpy()
    vote = votes_distinct[items.text_code]
    vote[is_comm | ~free] = -1
    voters = np.flatnonzero(vote >= 0)
    out = np.full(len(vote), -1, dtype="int64")
    if len(voters) == 0:
        return out

    onehot = pd.DataFrame(np.eye(n_stages, dtype="int64")[vote[voters]])
    counts = onehot.rolling(cfg.region_window, center=True, min_periods=1).sum().to_numpy()
    top = counts.max(axis=1, keepdims=True)
    tied = (counts == top).sum(axis=1) > 1
    label = np.where(tied, vote[voters], counts.argmax(axis=1))

    # Runs with too few votes are absorbed by the run before them (the first by the one after).
    starts, stops = _runs(label)
    short = (stops - starts) < cfg.region_min_kernels
    if short.all():
        return out
    run_label = pd.Series(np.where(short, np.nan, label[starts])).ffill().bfill().to_numpy(dtype="int64")
    label = np.repeat(run_label, stops - starts)

    # A run is its stage only if it holds a required kernel between its first and last vote.
    starts, stops = _runs(label)
    first, last = voters[starts], voters[stops - 1]
    req_item = require[items.text_code] & ~is_comm[:, None]
    cum = np.vstack([np.zeros((1, n_stages), dtype="int64"), np.cumsum(req_item, axis=0)])
    run_stage = label[starts]
    has_req = (cum[last + 1, run_stage] - cum[first, run_stage]) > 0
    other = n_stages
    label = np.repeat(np.where(has_req, run_stage, other), stops - starts)

    # Every other item joins the region it sits in, within its own step.
    filled = pd.Series(np.nan, index=np.arange(len(vote)))
    filled.iloc[voters] = label
    step = items.frame["step"].to_numpy()
    filled = filled.groupby(step).ffill()
    filled = filled.groupby(step).bfill()
    out = filled.fillna(-1).to_numpy(dtype="int64")
    out[out == other] = -1
    return out


def _stage_list(cfg: AdvisorConfig, codes: np.ndarray) -> str:
    return ", ".join(sorted({cfg.stages[c].name for c in np.unique(codes)}))


def assign_stages(profile: Profile, items: Items, cfg: AdvisorConfig,
                  workload: Workload | None = None) -> StageAssignment:
    """Stage code per item and how they were found (see the module docstring). ``workload``:
    the profile's :func:`~.workload.detect_workload` reading; kernel regions are guessed only
    where it allows (diffusion inference, or nothing identified) — an LLM is never a DiT."""
    other = len(cfg.stages)
    stage_list = "/".join(s.name for s in cfg.stages) or "no stage"
    if len(items.frame) == 0:
        return StageAssignment(np.zeros(0, dtype="int64"), "", "no device work in the profile")
    codes, method, hidden = _by_names(profile, items, cfg)
    named = (codes >= 0) & (codes < other)
    if named.any():
        note = f"stages from {method}: {_stage_list(cfg, codes[named])}"
        if hidden.any() and not is_training(profile, items, cfg):
            # Work inside a wrapper that hides the model's own modules (torch.compile): its kernels
            # say which stage it is.
            regions = _by_regions(items, cfg, free=hidden)
            placed = hidden & (regions >= 0)
            codes = np.where(placed, regions, codes)
            if placed.any():
                wrappers = ", ".join(cfg.opaque_modules.items)
                note += f"; inside {wrappers} from kernel regions: {_stage_list(cfg, regions[placed])}"
        return StageAssignment(np.where(codes >= 0, codes, other), method, note)
    if workload is not None and workload.mode == INFERENCE and not workload.allows_stage_guess:
        return StageAssignment(np.full(len(codes), other, dtype="int64"), "", stage_guess_note(workload))
    training = is_training(profile, items, cfg)
    if training:
        return StageAssignment(
            np.full(len(codes), other, dtype="int64"), "",
            f"no {stage_list} stage: no module or call-stack name matches one, and this is a training "
            f"profile (backward work such as {training!r}), where stage-typical kernels do not mark an "
            "inference stage")
    regions = _by_regions(items, cfg, free=codes < 0)
    found_regions = regions >= 0
    if not found_regions.any():
        needs = "; ".join(f"{s.name} needs {', '.join(s.require.items)}" for s in cfg.stages if s.require.items)
        return StageAssignment(
            np.full(len(codes), other, dtype="int64"), "",
            f"no {stage_list} stage: no module or call-stack name matches one and no kernel region is "
            f"dominated by stage-typical kernels ({needs})")
    out = np.where(codes >= 0, codes, np.where(found_regions, regions, other))
    found = _stage_list(cfg, regions[found_regions])
    return StageAssignment(out, "kernel regions",
                           f"stages guessed from kernel regions (no module or call-stack name says): {found}")
