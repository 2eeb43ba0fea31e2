"""Decide what a user-given path is, and which files of it we will read.

Accepted (friendlier than the reference, spec §1.1):

* a GPU torch.profiler trace: ``*.json`` / ``*.json.gz`` whose top level is an object, or a folder
  holding exactly one such trace (several → error listing them; ``--rank N`` picks one);
* an NPU Text export at any level: the run folder (``*_ascend_pt`` / ``*_ascend_ms``), its
  ``ASCEND_PROFILER_OUTPUT``, or the ``trace_view.json`` file (a top-level JSON array);
* an NPU Db export: ``ascend_pytorch_profiler*.db`` / ``ascend_mindspore_profiler*.db`` /
  ``msmonitor*.db`` or a folder holding one; Db wins over Text when both exist;
* a parent folder of several rank folders (or per-rank GPU traces) → error listing them;
  ``--rank N`` selects. Comparing two such folders rank by rank is :mod:`perfcmp_core.cluster`'s
  job; :func:`cluster_members` and :func:`member_rank` below tell it what the members are.

A member's rank comes from where the profilers record it, not from folder names, which real jobs
do not make rank-specific (torch_npu writes ``{host}_{pid}_{time}_ascend_pt``, PyTorch's trace
handler ``{host}_{pid}.{ms}.pt.trace.json``): ``profiler_info_<rank>.json`` (its ``rank_id``),
``ascend_*_profiler_<rank>.db``, a GPU trace's ``distributedInfo.rank``; only then a name that
spells it out (``rank3``, ``rank_3``).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..model import Kind
from ..notes import Note

DB_PREFIXES = {
    "ascend_pytorch_profiler": "pytorch",
    "ascend_mindspore_profiler": "mindspore",
    "msmonitor": "msmonitor",
}
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TRACE_VIEW = "trace_view.json"
#: Side files of an NPU Text export, by role.
TEXT_FILES = {
    "kernel_details": "kernel_details.csv",
    "op_statistic": "op_statistic.csv",
    "memory_record": "memory_record.csv",
    "operator_memory": "operator_memory.csv",
    "communication": "communication.json",
    "step_trace_time": "step_trace_time.csv",
}
#: What each side file enables (``info`` explains missing files with this).
ENABLES = {
    "kernel_details": "Computing breakdown (Cube/Vector/FA/Conv/Matmul) and KernelCompare",
    "op_statistic": "KernelTypeCompare (--use-kernel-type)",
    "memory_record": "Mem Usage in the overall summary",
    "operator_memory": "MemoryCompare",
    "communication": "RDMA/SDMA bandwidth",
    "step_trace_time": "per-step Computing / Communication / Free when trace_view.json is missing",
    "trace_view": "timeline (host ops: OperatorCompare, ModuleCompare, ApiCompare, memory records "
                  "attributed to their enclosing op — MemoryCompare groups them by their own names "
                  "instead; communication tasks: Wait / Transmit; the step explanation's idle causes)",
    "profiler_info": "profiler level / with_stack / profile_memory in info",
    "profiler_metadata": "process-group names (dp, tp …) of communication groups",
}
SQLITE_MAGIC = b"SQLite format 3\x00"
_GPU_TRACE_RE = re.compile(r"\.json(\.gz)?$", re.IGNORECASE)
_RANK_RE = re.compile(r"(?:rank[-_]?|_)(\d+)(?=[._-]|$)", re.IGNORECASE)
#: A rank spelled out in a name: ``rank3``, ``rank_3``, ``Rank-3`` (not inside a longer word or number).
_EXPLICIT_RANK_RE = re.compile(r"(?<![a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_PROFILER_INFO_RE = re.compile(r"profiler_info(?:_(\d+))?\.json")
_DB_RANK_RE = re.compile(r"_(\d+)\.db$", re.IGNORECASE)
#: How much of a GPU trace is searched for ``distributedInfo`` (Kineto writes it in the header).
_HEADER_BYTES = 1 << 20
#: profiler_info files larger than this are not parsed for their rank_id (they are a few kB).
_INFO_BYTES = 1 << 20


@dataclass
class Source:
    """A resolved input: its kind and the concrete files that will be read."""

    kind: Kind
    given: str  # the path as the user typed it
    framework: str = ""
    export: str = ""  # json | text | db
    level: str = ""  # file | trace | output | profiling
    trace: Path | None = None  # GPU trace or trace_view.json (None: a Text export without one)
    db: Path | None = None
    run_dir: Path | None = None  # *_ascend_pt folder (profiling level)
    output_dir: Path | None = None  # ASCEND_PROFILER_OUTPUT (or the folder holding trace_view)
    files: dict[str, Path] = field(default_factory=dict)  # side files that exist
    missing: list[str] = field(default_factory=list)  # side-file roles that do not exist
    notes: list[Note] = field(default_factory=list)
    rank: int | None = None


def _peek_json_start(path: Path) -> str:
    """First non-blank character of a (possibly gzipped) JSON file, '' if empty."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        else:
            with path.open("rb") as fh:
                head = fh.read(4096)
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as exc:
        reason = "is not a valid gzip file" if path.name.lower().endswith(".gz") else f"cannot be read ({exc})"
        raise InputError(path, reason) from None
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return chr(text[0]) if text else ""


def _rank_of(name: str) -> int | None:
    m = _RANK_RE.findall(name)
    return int(m[-1]) if m else None


def _pick(path: Path, candidates: list[Path], rank: int | None, what: str) -> Path:
    if len(candidates) == 1:
        return candidates[0]
    names = ", ".join(sorted(c.name for c in candidates))
    if rank is not None:
        hits = [c for c in candidates if _candidate_rank(c) == rank]
        if len(hits) == 1:
            return hits[0]
        raise InputError(path, f"no single {what} for --rank {rank} among: {names}")
    raise InputError(path, f"holds {len(candidates)} {what}s ({names}); pass --rank N or one path")


def _candidate_rank(p: Path) -> int | None:
    """The rank a ``--rank N`` pick matches: where the profiler recorded it, else any number the
    name ends a part with (``host_1.pt.trace.json`` → 1, as before rank metadata was read)."""
    recorded = member_rank(p)[0] if (p.is_dir() or _GPU_TRACE_RE.search(p.name)) else None
    return recorded if recorded is not None else _rank_of(p.name)


def member_rank(member: Path) -> tuple[int | None, str]:
    """The rank of one member of a cluster folder (a run folder or a GPU trace) and where it was
    found (for messages); ``(None, "")`` when nothing records it."""
    if member.is_dir():
        found = _run_dir_rank(member)
    else:
        found = _trace_rank(member)
    if found[0] is not None:
        return found
    m = _EXPLICIT_RANK_RE.search(member.name)
    return (int(m.group(1)), "its name") if m else (None, "")


def _run_dir_rank(run: Path) -> tuple[int | None, str]:
    """profiler_info_<rank>.json (its rank_id first, as the loader reads it), else the Db name."""
    out_dir = run if run.name == OUTPUT_DIR else run / OUTPUT_DIR
    meta_dir = run.parent if run.name == OUTPUT_DIR else run
    for info in _safe_listdir(meta_dir):
        m = _PROFILER_INFO_RE.fullmatch(info.name)
        if m is None or not info.is_file():
            continue
        rank = _info_rank_id(info)
        if rank is None and m.group(1) is not None:
            rank = int(m.group(1))
        if rank is not None:
            return rank, info.name
    for d in (out_dir, run):
        for db in _safe_listdir(d):
            m = _DB_RANK_RE.search(db.name)
            if m and _db_framework(db.name) and db.is_file():
                return int(m.group(1)), db.name
    return None, ""


def _info_rank_id(info: Path) -> int | None:
    try:
        if info.stat().st_size > _INFO_BYTES:
            return None
        data = json.loads(info.read_bytes())
    except (OSError, ValueError):
        return None
    rank = data.get("rank_id") if isinstance(data, dict) else None
    return rank if type(rank) is int and rank >= 0 else None


def _trace_rank(trace: Path) -> tuple[int | None, str]:
    """``distributedInfo.rank`` from the head of a GPU trace (-1 or absent: unknown)."""
    try:
        opener = gzip.open if trace.name.lower().endswith(".gz") else open
        with opener(trace, "rb") as fh:
            head = fh.read(_HEADER_BYTES).decode("utf-8", "replace")
    except (OSError, EOFError, zlib.error):
        return None, ""
    m = re.search(r'"distributedInfo"\s*:\s*(?=\{)', head)
    if m is None:
        return None, ""
    try:
        info, _ = json.JSONDecoder().raw_decode(head, m.end())
        rank = info.get("rank") if isinstance(info, dict) else None
    except ValueError:  # cut off by the head: the first "rank" key of the object
        hit = re.match(r'\{[^{}]*?"rank"\s*:\s*(-?\d+)', head[m.end():])
        rank = int(hit.group(1)) if hit else None
    return (rank, "distributedInfo") if type(rank) is int and rank >= 0 else (None, "")


def cluster_members(path: Path) -> list[Path] | None:
    """The members of a folder of ranks — run folders and GPU traces directly inside it — or None
    when ``path`` is not such a folder (a file, or a run folder itself)."""
    if not path.is_dir() or _is_run_dir(path):
        return None
    return [c for c in _safe_listdir(path)
            if (c.is_dir() and _is_run_dir(c)) or (c.is_file() and _GPU_TRACE_RE.search(c.name))]


def _db_framework(name: str) -> str | None:
    low = name.lower()
    if not low.endswith(".db"):
        return None
    for prefix, fw in DB_PREFIXES.items():
        if low.startswith(prefix):
            return fw
    return None


def _is_run_dir(p: Path) -> bool:
    """An NPU run or output folder (by its contents, or by its name: then a missing trace gets
    the precise "has no trace_view.json" error rather than "holds no profile")."""
    low = p.name.lower()
    return p.is_dir() and (
        p.name == OUTPUT_DIR
        or low.endswith(("_ascend_pt", "_ascend_ms"))
        or (p / OUTPUT_DIR).is_dir()
        or (p / TRACE_VIEW).is_file()
        or any(_db_framework(c.name) for c in _safe_listdir(p))
    )


def _safe_listdir(p: Path) -> list[Path]:
    try:
        return sorted(p.iterdir())
    except OSError:
        return []


def _framework_from_dir(run_dir: Path | None, out_dir: Path) -> str:
    for d in (run_dir, out_dir, out_dir.parent):
        if d is None:
            continue
        low = d.name.lower()
        if low.endswith("_ascend_ms"):
            return "mindspore"
        if low.endswith("_ascend_pt"):
            return "pytorch"
    return ""


def _npu_dir(given: str, path: Path, rank: int | None) -> Source:
    """``path`` is a run folder or an output folder of an NPU export."""
    if (path / OUTPUT_DIR).is_dir():
        run_dir, out_dir, level = path, path / OUTPUT_DIR, "profiling"
    else:
        run_dir, out_dir, level = None, path, "output"
        if path.name == OUTPUT_DIR:
            run_dir = path.parent
    dbs = [c for c in _safe_listdir(out_dir) if c.is_file() and _db_framework(c.name)]
    if dbs:
        db = _pick(out_dir, dbs, rank, "profiler database")
        src = Source("npu_db", given, framework=_db_framework(db.name) or "", export="db",
                     level=level, db=db, run_dir=run_dir, output_dir=out_dir, rank=_rank_of(db.stem))
        if (out_dir / TRACE_VIEW).is_file():
            src.notes.append(Note(f"both Db and Text exports present: using {db.name} (Db wins)"))
        return src
    trace = out_dir / TRACE_VIEW
    src = Source("npu_text", given, framework=_framework_from_dir(run_dir, out_dir) or "pytorch",
                 export="text", level=level, trace=trace if trace.is_file() else None, run_dir=run_dir,
                 output_dir=out_dir)
    _attach_text_side_files(src)
    if src.trace is not None:  # the timeline's own Overlap Analysis has the per-step times
        src.files.pop("step_trace_time", None)
        src.missing = [r for r in src.missing if r != "step_trace_time"]
    else:
        # An export that arrived without its largest file: compare what the side files allow, as
        # long as one of them describes the device (kernels or per-step times).
        if not {"kernel_details", "step_trace_time"} & src.files.keys():
            raise InputError(out_dir, f"has no {TRACE_VIEW}, no kernel_details.csv / step_trace_time.csv "
                                      "and no ascend_*_profiler_*.db (was the profile parsed/exported?)")
        src.missing.insert(0, "trace_view")
    return src


def _attach_text_side_files(src: Source) -> None:
    out_dir = src.output_dir
    assert out_dir is not None
    for role, fname in TEXT_FILES.items():
        p = out_dir / fname
        if p.is_file():
            src.files[role] = p
        else:
            src.missing.append(role)
    meta_dir = src.run_dir or out_dir
    infos = [c for c in _safe_listdir(meta_dir) if re.fullmatch(r"profiler_info(_\d+)?\.json", c.name)]
    if infos:
        src.files["profiler_info"] = infos[0]
        src.rank = _rank_of(infos[0].stem)
    else:
        src.missing.append("profiler_info")
    for d in (meta_dir, out_dir):
        if (d / "profiler_metadata.json").is_file():
            src.files["profiler_metadata"] = d / "profiler_metadata.json"
            break
    else:
        src.missing.append("profiler_metadata")


def detect(given: str, rank: int | None = None) -> Source:
    """Resolve ``given`` (a user path) into a :class:`Source`, or raise :class:`InputError`."""
    path = Path(given).expanduser()
    if not path.exists():
        if path.is_symlink():
            raise InputError(given, "is a broken symbolic link")
        raise InputError(given, "no such file or directory")
    notes: list[Note] = []
    if path.is_symlink():
        notes.append(Note(f"{given} is a symbolic link to {path.resolve()}"))
    path = path.resolve()
    if path.is_file():
        src = _detect_file(given, path)
    elif path.is_dir():
        src = _detect_dir(given, path, rank)
        notes += _links_outside(src, path)
    else:  # a FIFO, socket or device: never open it (reading a FIFO would block forever)
        raise InputError(given, "is not a regular file or folder")
    src.notes[:0] = notes
    return src


def _links_outside(src: Source, root: Path) -> list[Note]:
    """Notes for files of ``src`` that resolve outside the folder the user gave.

    A copied profile folder may hold symbolic links into someone else's tree; they are read
    (the owner and size checks still apply to their targets) but the user is told where the data
    really comes from.
    """
    notes = []
    for p in [src.trace, src.db, *src.files.values()]:
        if p is None:
            continue
        real = p.resolve()
        if not real.is_relative_to(root):
            notes.append(Note(f"{p} is a symbolic link to {real}, outside {root}"))
    return notes


def _detect_file(given: str, path: Path) -> Source:
    name = path.name.lower()
    fw = _db_framework(path.name)
    if name.endswith(".db"):
        if fw is None:
            raise InputError(path, "is not an Ascend profiler database "
                                   "(expected ascend_pytorch_profiler_*.db, ascend_mindspore_profiler_*.db "
                                   "or msmonitor*.db; analysis.db is not a profile)")
        with path.open("rb") as fh:
            if fh.read(16) != SQLITE_MAGIC:
                raise InputError(path, "is not an SQLite database")
        out_dir = path.parent
        run_dir = out_dir.parent if out_dir.name == OUTPUT_DIR else None
        return Source("npu_db", given, framework=fw, export="db", level="file", db=path,
                      run_dir=run_dir, output_dir=out_dir, rank=_rank_of(path.stem))
    if not _GPU_TRACE_RE.search(name):
        raise InputError(path, "unsupported file type (expected a .json/.json.gz trace, "
                               "an ascend_*_profiler_*.db or a profile folder)")
    first = _peek_json_start(path)
    if first == "":
        raise InputError(path, "is empty")
    if first == "{":
        return Source("gpu", given, framework="pytorch", export="json", level="file", trace=path)
    if first == "[":
        if name.endswith(".gz"):
            raise InputError(path, "compressed trace_view.json is not supported; decompress it first")
        src = Source("npu_text", given, export="text", level="trace", trace=path,
                     output_dir=path.parent)
        src.framework = _framework_from_dir(None, path.parent) or "pytorch"
        src.notes.append(Note("trace_view.json given alone: kernel_details.csv and the other side files "
                              "are not read (pass the run folder to use them)"))
        return src
    raise InputError(path, "is not a profiler trace (expected a JSON object or array)")


def _detect_dir(given: str, path: Path, rank: int | None) -> Source:
    if _is_run_dir(path):
        return _npu_dir(given, path, rank)
    children = _safe_listdir(path)
    runs = [c for c in children if c.is_dir() and _is_run_dir(c)]
    if runs:
        chosen = _pick(path, runs, rank, "rank folder")
        return _npu_dir(given, chosen, rank)
    traces = [c for c in children if c.is_file() and _GPU_TRACE_RE.search(c.name)]
    if traces:
        chosen = _pick(path, traces, rank, "trace")
        return _detect_file(given, chosen)
    raise InputError(path, "holds no profile (expected a *.pt.trace.json[.gz], a *_ascend_pt / "
                           "*_ascend_ms folder, ASCEND_PROFILER_OUTPUT, trace_view.json or "
                           "ascend_*_profiler_*.db)")
