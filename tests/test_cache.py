"""The profile cache: exact round trip, invalidation, damage tolerance, permissions, --no-cache."""

from __future__ import annotations

import json
import mmap
import os
import pickle
import shutil
import stat
import struct
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

from perfcmp_core import cache
from perfcmp_core.load import load_profile
from perfcmp_core.load.detect import Source
from perfcmp_core.model import SCHEMAS, Profile, ProfileMeta, frame
from perfcmp_core.notes import MACHINE, Note
from perfcmp_core.options import LoadOptions
from perfcmp_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
HOUR_NS = 3600 * 10**9

#: Text that must survive byte for byte: CJK, emoji, combining marks, NUL, a lone surrogate
#: (Python's json can produce one), quotes/newlines, and the empty string.
TEXTS = ["aten::mm", "Ascend 算子 ✓", "🚀 kernel", "e\u0301", "a\x00b", "\ud800x",
         'say "hi"\nnext', ""]


def _age(path: Path, ns_ago: int = HOUR_NS) -> None:
    """Give ``path`` an mtime in the past (profiles users open are not being written)."""
    t = time.time_ns() - ns_ago
    os.utime(path, ns=(t, t))


def _column(dtype: str, n: int, seed: int) -> object:
    rng = np.random.default_rng(seed)
    if dtype == "int64":
        return rng.integers(-(2**62), 2**62, n)
    if dtype == "float64":
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324, 1.7976931348623157e308])
        return np.concatenate([special, rng.normal(size=max(n - len(special), 0))])[:n]
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    return [TEXTS[i % len(TEXTS)] + ("" if i % 3 else str(i)) for i in range(n)]


def _profile(files: list[Path]) -> Profile:
    """Every table filled with every dtype of its schema, except two left empty."""
    tables = {}
    for ti, (name, schema) in enumerate(SCHEMAS.items()):
        n = 0 if name in ("queue", "overlap") else 5 + 7 * ti
        tables[name] = frame(schema, {c: _column(dt, n, ti * 100 + ci)
                                      for ci, (c, dt) in enumerate(schema.items())}, n=n)
    meta = ProfileMeta(kind="npu_text", source="given/path ✓", framework="pytorch", export="text",
                       level="profiling", rank=3, device=None, files_used=[str(f) for f in files],
                       files_missing=["op_statistic"], notes=[Note("note 一"), Note("two", MACHINE)], with_stack=True,
                       profile_memory=False, record_shapes=None, profiler_level="Level1",
                       backward_tid=42, has_pmu=True, group_names={"group_1": "dp", "g2": "tp ✓"},
                       rdma_bandwidth_gbps=12.345678901234567, sdma_bandwidth_gbps=0.1,
                       selected_step=None)
    return Profile(meta=meta, **tables)


class Reader:
    """A loader stand-in that counts how often the input is really read."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.calls = 0

    def __call__(self, src: Source, opts: LoadOptions) -> Profile:
        self.calls += 1
        return self.profile


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Source, list[Path]]:
    """A trace plus a side file the loader reads (listed in files_used, not in the Source)."""
    trace = tmp_path / "in" / "trace_view.json"
    side = tmp_path / "in" / "kernel_details.csv"
    trace.parent.mkdir()
    trace.write_text("[]")
    side.write_text("Name\n")
    for p in (trace, side):
        _age(p)
    return Source("npu_text", str(trace), trace=trace), [trace, side]


def _assert_same(a: Profile, b: Profile) -> None:
    assert a.meta == b.meta
    for name, df in a.tables().items():
        got = b.tables()[name]
        pdt.assert_frame_equal(got, df, check_exact=True)
        assert [str(t) for t in got.dtypes] == [str(t) for t in df.dtypes]
        for col in df.columns:  # bitwise for floats: -0.0 and NaN payloads too
            if df[col].dtype == "float64":
                assert got[col].to_numpy().tobytes() == df[col].to_numpy().tobytes()


def test_round_trip_is_exact(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    original = _profile(files)
    read = Reader(original)
    d = tmp_path / "cache"
    first = cache.cached_load(src, LoadOptions(), read, directory=d)
    second = cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1
    assert first is original and second is not original
    _assert_same(original, second)
    second.check()


def test_object_text_columns_round_trip(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    """pandas 2 keeps text as object columns; those come back as object columns."""
    src, files = inputs
    original = _profile(files)
    original.ops["name"] = pd.Series(TEXTS * 10, dtype=object)[: len(original.ops)]
    read = Reader(original)
    for _ in range(2):
        got = cache.cached_load(src, LoadOptions(), read, directory=tmp_path / "c")
    assert read.calls == 1
    assert got.ops["name"].dtype == object
    _assert_same(original, got)


def test_unrestorable_columns_are_not_cached(tmp_path: Path,
                                             inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    original = _profile(files)
    original.ops["name"] = pd.Series([None, *["x"] * (len(original.ops) - 1)], dtype=object)
    read = Reader(original)
    for _ in range(2):
        cache.cached_load(src, LoadOptions(), read, directory=tmp_path / "c")
    assert read.calls == 2
    assert not list((tmp_path / "c").glob("*" + cache.SUFFIX))


@pytest.mark.parametrize("change", ["mtime", "size", "side file mtime"])
def test_changed_input_is_read_again(tmp_path: Path, inputs: tuple[Source, list[Path]],
                                     change: str) -> None:
    src, files = inputs
    read = Reader(_profile(files))
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)
    if change == "mtime":
        _age(files[0], 2 * HOUR_NS)
    elif change == "size":
        st = files[0].stat()
        files[0].write_text("[ ]")
        os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        _age(files[1], 2 * HOUR_NS)
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2  # the re-read result was stored again


def test_options_that_change_the_result_change_the_key(inputs: tuple[Source, list[Path]]) -> None:
    src, _ = inputs
    key = cache.entry_key(src, LoadOptions())
    assert cache.entry_key(src, LoadOptions(force=True)) == key
    assert cache.entry_key(src, LoadOptions(use_cache=False)) == key
    # one entry holds every step: a step is cut from it after reading (issue 27)
    assert cache.entry_key(src, LoadOptions(step=1)) == key
    for opts in (LoadOptions(rank=0), LoadOptions(gpu_flow_cat="ac2g"),
                 LoadOptions(load_memory=False)):
        assert cache.entry_key(src, opts) != key, opts
    other = Source(src.kind, src.given + "/../" + Path(src.given).name, trace=src.trace)
    assert cache.entry_key(other, LoadOptions()) != key  # meta.source is the given spelling


def test_recently_modified_input_is_not_cached(tmp_path: Path,
                                               inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    files[1].write_text("Name\nfresh\n")  # being written right now
    read = Reader(_profile(files))
    for _ in range(2):
        cache.cached_load(src, LoadOptions(), read, directory=tmp_path / "cache")
    assert read.calls == 2



def _manifest(data: bytes) -> tuple[dict, int]:
    """An entry's manifest and where it starts."""
    _, _, _, at, length = cache._HEADER.unpack_from(data, 0)
    return json.loads(data[at:at + length]), at


def _with_manifest(data: bytes, manifest: dict) -> bytes:
    """The entry with ``manifest`` in place of its own (the header updated to match)."""
    _, at = _manifest(data)
    text = json.dumps(manifest).encode()
    header = cache._HEADER.pack(cache.MAGIC, cache.FORMAT, 0, at, len(text))
    return header + data[len(header):at] + text


def _buffer(manifest: dict, kind: str, part: str, dtype: str | None = None) -> list:
    """``[dtype, offset, count]`` of the first non-empty buffer ``part`` of a ``kind`` column."""
    for table in manifest["tables"].values():
        for _, col_dtype, col_kind, parts in table["columns"]:
            if col_kind == kind and parts[part][2] > 1 and dtype in (None, col_dtype):
                return parts[part]
    raise AssertionError(f"no {kind} column with a {part} buffer")


def _poke(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def _damaged(data: bytes, damage: str) -> bytes:
    """``data`` (a complete entry) damaged the way ``damage`` names."""
    manifest, at = _manifest(data)
    if damage == "garbage":
        return b"not an entry at all" * 100
    if damage == "empty":
        return b""
    if damage == "truncated":
        return data[: len(data) // 2]
    if damage == "one byte short":
        return data[:-1]
    if damage == "one byte more":
        return data + b"\0"
    if damage == "header only":
        return data[:cache.ALIGN]
    if damage == "wrong magic":
        return b"PFCMPCOX" + data[8:]
    if damage == "other format":  # a well-formed entry of another layout version
        bumped = _with_manifest(data, {**manifest, "format": cache.FORMAT + 1})
        return _poke(bumped, 8, struct.pack("<I", cache.FORMAT + 1))
    if damage == "manifest past the end":
        return _poke(data, 16, struct.pack("<QQ", at, len(data)))
    if damage == "manifest inside the header":
        return _poke(data, 16, struct.pack("<QQ", 8, len(data) - 8))
    if damage == "manifest not json":
        return data[:at] + b"{" * (len(data) - at)
    values = _buffer(manifest, "num", "values", "int64")
    if damage == "buffer past the end":
        values[1] = (len(data) + cache.ALIGN) // cache.ALIGN * cache.ALIGN
    elif damage == "buffer over the manifest":
        values[1] = at // cache.ALIGN * cache.ALIGN
        values[2] = 10**6
    elif damage == "buffer at a huge offset":
        values[1] = 2**62
    elif damage == "buffer before the columns":
        values[1] = 0
    elif damage == "negative count":
        values[2] = -1
    elif damage == "count is not the row count":
        values[2] -= 1
    elif damage == "misaligned buffer":
        values[1] += 8
    elif damage == "object dtype":
        values[0] = "|O"
    elif damage == "dtype not the column's":
        values[0] = "<f8"
    elif damage == "float offset":
        values[1] = float(values[1])
    else:
        return _damaged_text(data, manifest, damage)
    return _with_manifest(data, manifest)


def _damaged_text(data: bytes, manifest: dict, damage: str) -> bytes:
    codes = _buffer(manifest, "text", "codes")
    offsets = next(parts["offsets"] for table in manifest["tables"].values()
                   for *_, parts in table["columns"] if parts.get("codes") == codes)
    blob = next(parts["blob"] for table in manifest["tables"].values()
                for *_, parts in table["columns"] if parts.get("codes") == codes)
    if damage == "code past the distinct values":
        return _poke(data, codes[1], struct.pack("<i", offsets[2] - 1))
    if damage == "negative code":
        return _poke(data, codes[1], struct.pack("<i", -1))
    if damage == "text offset past the blob":
        return _poke(data, offsets[1] + 8, struct.pack("<q", blob[2] + 1))
    if damage == "text offsets decreasing":
        return _poke(data, offsets[1] + 8, struct.pack("<q", -5))
    if damage == "invalid utf-8":
        return _poke(data, blob[1], b"\xff")
    if damage == "bool byte not 0 or 1":
        flags = _buffer(manifest, "num", "values", "bool")
        return _poke(data, flags[1], b"\x02")
    raise AssertionError(damage)


DAMAGES = ["garbage", "empty", "truncated", "one byte short", "one byte more", "header only",
           "wrong magic", "other format", "manifest past the end", "manifest inside the header",
           "manifest not json", "buffer past the end", "buffer over the manifest",
           "buffer at a huge offset", "buffer before the columns", "negative count",
           "count is not the row count", "misaligned buffer", "object dtype",
           "dtype not the column's", "float offset", "code past the distinct values",
           "negative code", "text offset past the blob", "text offsets decreasing",
           "invalid utf-8", "bool byte not 0 or 1"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_entry_is_ignored_and_rewritten(tmp_path: Path, inputs: tuple[Source, list[Path]],
                                                damage: str) -> None:
    """Whatever is wrong with an entry (cut short, planted, a length or offset pointing outside
    its buffers, a code past its dictionary), reading it neither crashes nor reads out of
    bounds: the entry is deleted, the input read again and the entry rewritten."""
    src, files = inputs
    original = _profile(files)
    read = Reader(original)
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)
    (entry,) = d.glob("*" + cache.SUFFIX)
    data = entry.read_bytes()
    bad = _damaged(data, damage)
    assert bad != data
    entry.write_bytes(bad)
    assert cache._read_entry(entry) is None and not entry.exists()  # deleted
    entry.write_bytes(bad)
    got = cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2 and got is original
    again = cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2
    _assert_same(original, again)


def test_every_damage_is_caught_by_a_check(tmp_path: Path, inputs: tuple[Source, list[Path]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The damages above are refused by the format's own checks (``_Damaged``), before numpy
    or pandas is asked to read anything outside a buffer, except those whose damage is only
    visible as text (JSON, UTF-8)."""
    src, files = inputs
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), Reader(_profile(files)), directory=d)
    (entry,) = d.glob("*" + cache.SUFFIX)
    data = entry.read_bytes()
    for damage in DAMAGES:
        if damage in ("garbage", "manifest not json", "invalid utf-8"):
            continue
        with pytest.raises(cache._Damaged):
            cache._decode(_damaged(data, damage))


def test_numeric_columns_are_mapped_not_copied(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    """A profile read from the cache holds its numeric columns and its text codes as read-only
    views of the mapped entry file: nothing is copied, and nothing can write into them."""
    src, files = inputs
    read = Reader(_profile(files))
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)
    warm = cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1

    def mapping(values: np.ndarray) -> object:
        while isinstance(values, np.ndarray):
            values = values.base
        return values.obj if isinstance(values, memoryview) else values

    maps = set()
    numeric = 0
    for name, df in warm.tables().items():
        for col in df.columns:
            if df[col].dtype.kind in "biuf" and len(df):
                values = df[col].to_numpy()
                assert isinstance(mapping(values), mmap.mmap), (name, col)
                assert not values.flags.writeable
                maps.add(id(mapping(values)))
                numeric += 1
    assert numeric > 20 and len(maps) == 1  # every column a view of the one mapping
    for codes, _ in warm.text_codes.values():
        assert id(mapping(codes)) in maps and not codes.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        warm.kernels["start_ns"].to_numpy()[0] = 1


def test_file_system_without_mapping_reads_the_entry(tmp_path: Path, inputs: tuple[Source, list[Path]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a file cannot be mapped, the entry is read whole instead: the same profile."""
    src, files = inputs
    original = _profile(files)
    read = Reader(original)
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(19, "No such device")

    monkeypatch.setattr(cache.mmap, "mmap", refuse)
    got = cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1
    _assert_same(original, got)


def test_planted_symlink_is_not_followed(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    """An entry name that is a symbolic link (to a valid entry, even) is not read through, and
    the file it points to is left as it was; the input is read and a real entry replaces the
    link."""
    src, files = inputs
    read = Reader(_profile(files))
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)
    (entry,) = d.glob("*" + cache.SUFFIX)
    elsewhere = tmp_path / "elsewhere.pfcol"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2
    assert elsewhere.read_bytes() == before
    assert entry.is_file() and not entry.is_symlink()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_planted_fifo_is_not_waited_on(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    """A FIFO under an entry's name would block a plain open for ever: it is opened without
    waiting, refused as no regular file and replaced."""
    src, files = inputs
    read = Reader(_profile(files))
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    entry = d / (cache.entry_key(src, LoadOptions()) + cache.SUFFIX)
    os.mkfifo(entry, 0o600)
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1 and entry.is_file()
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1


def test_entries_of_the_npz_layout_are_never_read_and_pruned(
        tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    """Entries of the earlier ``.npz`` layout (format 3) are not read (no key of this version
    names them) and the next write deletes them, and their locks once stale; other files stay."""
    src, files = inputs
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    old = "0" * 64  # the key of an entry of format 3
    with (d / (old + ".npz")).open("wb") as fh:
        np.savez(fh, manifest=np.frombuffer(b"{}", dtype=np.uint8))
    (d / (old + ".lock")).write_bytes(b"")
    _age(d / (old + ".lock"), 2 * HOUR_NS)
    (d / "notes.txt").write_text("not ours to delete")
    read = Reader(_profile(files))
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1
    key = cache.entry_key(src, LoadOptions())
    assert sorted(p.name for p in d.iterdir()) == sorted([key + cache.SUFFIX, key + ".lock", "notes.txt"])


class _Boom:
    """Unpickling this would run code; a cache that used pickle would set ``ran``."""

    ran = False

    def __reduce__(self) -> tuple:
        return (_mark_ran, ())


def _mark_ran() -> None:
    _Boom.ran = True


@pytest.mark.parametrize("name", ["entry", "npz entry"])
def test_pickled_payload_is_never_executed(tmp_path: Path, inputs: tuple[Source, list[Path]],
                                           name: str) -> None:
    """A pickle planted as an entry, in this layout's name or the ``.npz`` layout's, is never
    unpickled."""
    src, files = inputs
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    suffix = cache.SUFFIX if name == "entry" else ".npz"
    with (d / (cache.entry_key(src, LoadOptions()) + suffix)).open("wb") as fh:
        np.savez(fh, manifest=np.array([_Boom()], dtype=object))
        pickle.dump(_Boom(), fh)
    read = Reader(_profile(files))
    cache.cached_load(src, LoadOptions(), read, directory=d)
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 1 and not _Boom.ran


def test_permissions(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    d = tmp_path / "cache"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    cache.cached_load(src, LoadOptions(), Reader(_profile(files)), directory=d)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    (entry,) = d.glob("*" + cache.SUFFIX)
    (lock,) = d.glob("*.lock")  # the entry's load lock (empty)
    for made in (entry, lock):
        assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert sorted(p.name for p in files[0].parent.iterdir()) == ["kernel_details.csv",
                                                                  "trace_view.json"]


def test_symlinked_cache_dir_is_not_used(tmp_path: Path, inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "cache"
    link.symlink_to(target)
    read = Reader(_profile(files))
    for _ in range(2):
        cache.cached_load(src, LoadOptions(), read, directory=link)
    assert read.calls == 2 and not list(target.iterdir())


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_entry_owned_by_someone_else_is_ignored(tmp_path: Path,
                                                inputs: tuple[Source, list[Path]]) -> None:
    src, files = inputs
    read = Reader(_profile(files))
    d = tmp_path / "cache"
    cache.cached_load(src, LoadOptions(), read, directory=d)
    (entry,) = d.glob("*" + cache.SUFFIX)
    os.chown(entry, 12345, 12345)
    cache.cached_load(src, LoadOptions(), read, directory=d)
    assert read.calls == 2


def test_size_bound_keeps_the_newest(tmp_path: Path) -> None:
    d = tmp_path / "cache"
    written = []
    for i in range(4):
        trace = tmp_path / f"t{i}.json"
        trace.write_text("{}")
        _age(trace)
        src = Source("gpu", str(trace), trace=trace)
        cache.cached_load(src, LoadOptions(), Reader(_profile([trace])), directory=d,
                          max_bytes=10**9)
        written.append(d / (cache.entry_key(src, LoadOptions()) + cache.SUFFIX))
        entry_size = written[-1].stat().st_size
        t = time.time() - 100 + i  # distinct, increasing use times
        os.utime(written[-1], (t, t))
    # Room for two entries: the two most recently used stay.
    trace = tmp_path / "t4.json"
    trace.write_text("{}")
    _age(trace)
    src = Source("gpu", str(trace), trace=trace)
    cache.cached_load(src, LoadOptions(), Reader(_profile([trace])), directory=d,
                      max_bytes=int(2.5 * entry_size))
    kept = sorted(p.name for p in d.glob("*" + cache.SUFFIX))
    newest = d / (cache.entry_key(src, LoadOptions()) + cache.SUFFIX)
    assert kept == sorted([newest.name, written[3].name])


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "perfcmp-tui"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "perfcmp-tui"


@pytest.fixture
def gpu_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The committed GPU fixture, copied with an old mtime; the cache goes to a temp XDG dir."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "base.pt.trace.json"
    shutil.copy(ROOT / "fixtures" / "gpu" / "base.pt.trace.json", path)
    _age(path)
    return path


def test_load_profile_uses_the_cache(gpu_trace: Path) -> None:
    cold = load_profile(str(gpu_trace), LoadOptions(use_cache=False))
    assert not (gpu_trace.parent / "xdg").exists()
    first = load_profile(str(gpu_trace), LoadOptions())
    entries = list((gpu_trace.parent / "xdg" / "perfcmp-tui").glob("*" + cache.SUFFIX))
    assert len(entries) == 1
    warm = load_profile(str(gpu_trace), LoadOptions())
    _assert_same(cold, first)
    _assert_same(cold, warm)
    # Only the cache folder was written next to the input (none inside the input's folder).
    assert sorted(p.name for p in gpu_trace.parent.iterdir()) == ["base.pt.trace.json", "xdg"]


def test_a_cached_profile_keeps_the_stored_text_codes(gpu_trace: Path) -> None:
    """A profile read from the cache starts with every text column's codes as the cache stored
    them, and they are the column's own first-seen numbering (computed here from the text); a
    parsed profile starts with none, and a step cut of a cached one starts without them."""
    from perfcmp_core.load.steps import select_step

    assert load_profile(str(gpu_trace), LoadOptions()).text_codes == {}  # parsed, then stored
    warm = load_profile(str(gpu_trace), LoadOptions())
    text = [(name, col) for name, df in warm.tables().items() for col in df.columns
            if df[col].dtype == object]
    assert text and set(warm.text_codes) == set(text)
    for name, col in text:
        values = getattr(warm, name)[col].tolist()
        distinct = list(dict.fromkeys(values))
        codes, stored = warm.text_codes[(name, col)]
        assert stored.tolist() == distinct  # first-seen order
        assert (stored[codes] == np.asarray(values, dtype=object)).all()
    step = int(warm.steps["step"].iloc[0])
    assert select_step(warm, step).text_codes == {}


def test_cli_no_cache_flag(gpu_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = gpu_trace.parent / "xdg" / "perfcmp-tui"
    assert main(["info", str(gpu_trace), "--no-cache"]) == 0
    assert not folder.exists()
    uncached = capsys.readouterr().out
    assert main(["info", str(gpu_trace)]) == 0
    assert len(list(folder.glob("*" + cache.SUFFIX))) == 1
    assert main(["info", str(gpu_trace)]) == 0
    cached = capsys.readouterr().out
    assert cached == uncached * 2


def test_a_pair_from_the_cache_loads_in_this_process(gpu_trace: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides cached: read here one after the other (no worker, no pickling round trip);
    one side not cached: parsed in a worker as before, and the same profiles either way."""
    from perfcmp_core import pair

    comp = gpu_trace.with_name("comp.pt.trace.json")
    shutil.copy(ROOT / "fixtures" / "gpu" / "comp.pt.trace.json", comp)
    _age(comp)
    opts = LoadOptions()
    cold = {side: p for side, p, _, _ in pair.iter_pair(str(gpu_trace), str(comp), opts, opts, parallel=True)}
    assert len(list((gpu_trace.parent / "xdg" / "perfcmp-tui").glob("*" + cache.SUFFIX))) == 2

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker was started for cached profiles")

    with monkeypatch.context() as m:
        m.setattr(pair, "Worker", no_worker)
        warm = {side: p for side, p, _, _ in pair.iter_pair(str(gpu_trace), str(comp), opts, opts, parallel=True)}
    for side in ("base", "comparison"):
        _assert_same(cold[side], warm[side])


def test_preload_imports_the_loader_unless_the_profile_is_cached(gpu_trace: Path) -> None:
    """Before the worker is forked the loader is imported (the worker inherits it), except for
    a profile the cache holds, which needs no parser at all."""
    import subprocess
    import sys

    script = ("import sys; from perfcmp_core.load import preload; from perfcmp_core.options import LoadOptions; "
              f"cached = preload({str(gpu_trace)!r}, LoadOptions()); "
              "print(cached, 'perfcmp_core.load.gpu_read' in sys.modules)")
    env = dict(os.environ, XDG_CACHE_HOME=str(gpu_trace.parent / "xdg"))
    run = lambda: subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,  # noqa: E731
                                 check=True).stdout.split()
    assert run() == ["False", "True"]
    load_profile(str(gpu_trace), LoadOptions())  # stores the entry
    assert run() == ["True", "False"]


@pytest.mark.parametrize("pair", ["gpu", "npu_text", "npu_db"])
def test_a_step_is_a_view_of_the_cached_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair: str) -> None:
    """Choosing a step reads the one cached entry of the whole profile and cuts the step from it:
    no new entry, no parse, and the same tables as loading that step without the cache (the Db's
    statistic and profiler breakdown included)."""
    from perfcmp_core.load import load_profile

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = str(ROOT / "fixtures" / {"gpu": "gpu/base.pt.trace.json", "npu_text": "npu_text/base_ascend_pt",
                                    "npu_db": "npu_db/base_ascend_pt"}[pair])
    load_profile(path, LoadOptions())  # stores the whole profile
    entries = sorted((tmp_path / "perfcmp-tui").glob("*" + cache.SUFFIX))
    assert len(entries) == 1
    import perfcmp_core.load as load

    parse = load._read_kind
    for step in (1, 2):
        monkeypatch.setattr(load, "_read_kind", lambda *a: pytest.fail("parsed again for a step"))
        cached = load_profile(path, LoadOptions(step=step))
        monkeypatch.setattr(load, "_read_kind", parse)
        fresh = load_profile(path, LoadOptions(step=step, use_cache=False))
        assert sorted((tmp_path / "perfcmp-tui").glob("*" + cache.SUFFIX)) == entries
        assert cached.meta.selected_step == step and cached.meta.profiler_overlap_ns == fresh.meta.profiler_overlap_ns
        for name, table in fresh.tables().items():
            pd.testing.assert_frame_equal(getattr(cached, name), table, check_dtype=False, obj=name)
        assert len(cached.steps) == 1 and int(cached.steps["step"].iloc[0]) == step


@pytest.mark.parametrize("kind", ["npu_text", "npu_db"])
def test_every_comparison_reads_a_mapped_profile_unchanged(kind: str, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every comparison and the advisor run on profiles read from the cache, whose columns are
    read-only views of the mapped entries (nothing writes into a table in place), and report
    exactly what they report on freshly parsed profiles."""
    import perfcmp_core.load as load

    pair = [str(ROOT / "fixtures" / kind / f"{side}_ascend_pt") for side in ("base", "comp")]
    assert main(["summary", *pair, "--no-cache"]) == 0
    parsed = capsys.readouterr().out
    assert main(["summary", *pair]) == 0  # parsed, then stored
    assert capsys.readouterr().out == parsed
    assert len(list(cache.cache_dir().glob("*" + cache.SUFFIX))) == 2
    monkeypatch.setattr(load, "_read_kind", lambda *a: pytest.fail("parsed instead of read from the cache"))
    assert main(["summary", *pair]) == 0
    assert capsys.readouterr().out == parsed
