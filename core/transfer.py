"""How a child's values reach its parent without a whole pickled copy on either side.

``Connection.send`` pickles a value to one ``bytes`` and writes it; ``recv`` reads all of it,
then unpickles: the child holds the value and its bytes while it sends, the parent the bytes and
the value while it unpickles — a few hundred MB twice for a loaded NPU side. Here a value is
pickled (protocol 5) straight into the channel: its numpy / pandas blocks go out of band, each
written from the array's own memory (:func:`send_value`), and the rest — the in-band pickle,
text columns included — in records of at most :data:`CHUNK` bytes, so the child never holds
more than one of them. The parent's :class:`Receiver` reads each block into writeable memory of
its size (a ``bytearray``; from :data:`MAPPED_MIN` on, an anonymous mapping, given back to the
system as soon as it is freed) and keeps the in-band records; :meth:`Received.load` unpickles
from them, dropping each record as it is read. The unpickled arrays use that memory, no copy:
writeable where they were writeable in the child (pandas may write in place), read-only where
they were read-only there — as a value made in this process would be.

The parent reads on a thread of its own as soon as the child writes, so a child whose result is
larger than the pipe does not wait, blocked in its write, for the parent to ask (a step run beside
ends in 0.1 s, its parent asks seconds later): it ends, and is reaped, at once. That thread only
reads the channel into buffers, so a fork while it runs is safe
(:func:`perfcmp_core.processes.start_method`).

The channel is a Unix socket pair (``Pipe(duplex=True)``), not a pipe: the reader receives each
record with ``MSG_WAITALL``, one call without the GIL, where a pipe returns at most 64 KB per read
and each read would wait for the GIL that the parent's own work holds.

Wire format: records of a one-byte kind and an eight-byte length, then the payload: in-band bytes
(``h``), one out-of-band buffer (``b``), the end of a value (``e``), or the end of a value whose
pickling failed half way (``x``: what came of it is dropped, and the sender sends what it sends
instead).
"""

from __future__ import annotations

import mmap
import os
import pickle
import socket
import struct
import sys
import threading
from collections import deque
from typing import Any, Callable, Union

#: The in-band bytes a sender gathers before writing them as one record.
CHUNK = 4 << 20
_HEAD, _BUFFER, _END, _ABORT = b"h", b"b", b"e", b"x"
_RECORD = struct.Struct("!cQ")
#: A payload this small goes in one write with its record's header.
_SMALL = 64 << 10
#: A received payload this large is mapped memory of its own (:meth:`Receiver._exactly`).
MAPPED_MIN = 1 << 20
#: What a received payload is held in (both writeable buffers).
Buffer = Union[bytearray, mmap.mmap]


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def _write_record(fd: int, kind: bytes, payload: Any) -> None:
    size = memoryview(payload).nbytes
    header = _RECORD.pack(kind, size)
    if size <= _SMALL:
        _write_all(fd, header + bytes(payload))
    else:
        _write_all(fd, header)
        _write_all(fd, payload)


class _Sink:
    """The file a pickler writes to: its in-band bytes in records of about :data:`CHUNK`."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._staged = bytearray()

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if size >= CHUNK:  # a large in-band payload (bytes): written from where it is
            self.flush()
            _write_record(self._fd, _HEAD, data)
        else:
            self._staged += data
            if len(self._staged) >= CHUNK:
                self.flush()
        return size

    def flush(self) -> None:
        if self._staged:
            _write_record(self._fd, _HEAD, self._staged)
            del self._staged[:]


#: An object array of this many cells or more is sent as codes (:class:`_Pickler`) …
CODED_MIN_CELLS = 4096
#: … when it holds at most this share of distinct objects.
CODED_MAX_SHARE = 0.5


class _Pickler(pickle.Pickler):
    """The pickler of :func:`send_value`: a large object array that repeats its objects (a
    profile's text columns, a result table's names and call stacks) goes as an array of codes,
    out of band, and its distinct objects, in band.

    Why: pickle writes every cell of an object array in band, a memo look-up per repeated
    object, and reads it back the same way: for the 5.5 M text cells of one side of the 32×92
    NPU Db pair that was 0.14 s to pickle and 0.14 s to unpickle, one after the other while
    both processes wait (the comparison side's profile reaches the steps only then). Numbered
    by object (:func:`perfcmp_core.text_codes.by_object`: addresses, no string touched) and
    taken back from the distinct objects: 0.06 and 0.04 s. Cells that held one object hold one
    object again, as the memo gives; the array comes back C-contiguous and writeable, as it
    left."""

    def reducer_override(self, obj: Any) -> Any:
        np = sys.modules.get("numpy")
        if (np is None or type(obj) is not np.ndarray or obj.dtype != object
                or obj.size < CODED_MIN_CELLS or not obj.flags.c_contiguous or not obj.flags.writeable):
            return NotImplemented
        from .text_codes import by_object

        grouped = by_object(obj.reshape(-1))
        if grouped is None or len(grouped[1]) > CODED_MAX_SHARE * obj.size:
            return NotImplemented
        codes, firsts = grouped
        return _object_cells, (firsts, codes.astype(np.int32 if len(firsts) < 2**31 else np.int64), obj.shape)


def _object_cells(distinct: Any, codes: Any, shape: tuple[int, ...]) -> Any:
    """An object array sent by :class:`_Pickler`: its cells taken back from its distinct objects."""
    return distinct[codes].reshape(shape)


def send_value(fd: int, value: object) -> None:
    """Send ``value`` on the channel ``fd`` (the child's end): its in-band pickle as it is made,
    then each out-of-band buffer from its own memory. A value that cannot be pickled raises
    here, its partial records discarded by the receiver."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        sink = _Sink(fd)
        _Pickler(sink, protocol=5, buffer_callback=buffers.append).dump(value)
        sink.flush()
        for buffer in buffers:
            with buffer.raw() as raw:
                _write_record(fd, _BUFFER, raw)
    except BaseException:
        _write_record(fd, _ABORT, b"")
        raise
    _write_record(fd, _END, b"")


class _Chunks:
    """The in-band records of one value as a file to unpickle from; each record is dropped once
    read (the value grows as its pickle shrinks)."""

    def __init__(self, chunks: list[Buffer]) -> None:
        self._chunks = deque(chunks)
        chunks.clear()
        self._at = 0

    def readinto(self, out: Any) -> int:
        target = memoryview(out).cast("B")
        done = 0
        while done < len(target) and self._chunks:
            first = self._chunks[0]
            n = min(len(first) - self._at, len(target) - done)
            target[done:done + n] = memoryview(first)[self._at:self._at + n]
            done += n
            self._at += n
            if self._at == len(first):
                self._chunks.popleft()
                self._at = 0
        return done

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = sum(len(c) for c in self._chunks) - self._at
        out = bytearray(n)
        return bytes(out[:self.readinto(out)])

    def readline(self) -> bytes:
        line = bytearray()
        while self._chunks:
            first = self._chunks[0]
            end = first.find(b"\n", self._at)
            line += self.read((end + 1 if end >= 0 else len(first)) - self._at)
            if end >= 0:
                break
        return bytes(line)


class _ReaderThread(threading.Thread):
    """A :class:`Receiver`'s thread (:func:`perfcmp_core.processes.start_method` forks while
    only these run beside the caller)."""


def reader_threads_only() -> bool:
    """Whether every thread but the caller's is a :class:`Receiver`'s."""
    me = threading.current_thread()
    return all(t is me or isinstance(t, _ReaderThread) for t in threading.enumerate())


class Received:
    """One value as it arrived: its in-band records and its out-of-band buffers."""

    def __init__(self, head: list[Buffer], buffers: list[Buffer]) -> None:
        self._head, self._buffers = head, buffers

    def load(self) -> Any:
        """The value, unpickled once (its arrays use the received buffers)."""
        head, buffers = self._head, self._buffers
        self._head, self._buffers = [], []
        return pickle.Unpickler(_Chunks(head), buffers=buffers).load()


class Receiver:
    """Reads the values a child sends on ``fd`` (the parent's end, duplicated here) on a thread
    of its own, from now until the child's end is closed or :meth:`close`; then ``ended()`` is
    called on that thread (the child's reaping)."""

    def __init__(self, fd: int, name: str, ended: Callable[[], None]) -> None:
        self._sock = socket.socket(fileno=os.dup(fd))
        self._sock.setblocking(True)
        self._ended_cb = ended
        self._values: deque[Received] = deque()
        self._cond = threading.Condition()
        self._over = False
        self._closed = False
        self._thread = _ReaderThread(target=self._run, name=f"{name}-reader", daemon=True)
        self._thread.start()

    def _exactly(self, n: int) -> Buffer | None:
        # A large payload in memory of its own, unmapped as soon as it is freed: from the heap,
        # the in-band records freed while the value is unpickled would leave holes the process
        # keeps (≈ 150 MB more in the parent after the 32x92 Db pair's operators / modules).
        # Private (copy on write), like the heap: a child forked later writes into its own copy.
        out: Buffer = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE) if n >= MAPPED_MIN else bytearray(n)
        view = memoryview(out)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got, socket.MSG_WAITALL)
            if k == 0:
                return None
            got += k
        return out

    def _run(self) -> None:
        head: list[Buffer] = []
        buffers: list[Buffer] = []
        try:
            while True:
                header = self._exactly(_RECORD.size)
                if header is None:
                    break
                kind, size = _RECORD.unpack(header)
                payload = self._exactly(size) if size else bytearray()
                if payload is None:
                    break
                if kind == _HEAD:
                    head.append(payload)
                elif kind == _BUFFER:
                    buffers.append(payload)
                elif kind == _ABORT:
                    head, buffers = [], []
                elif kind == _END:
                    with self._cond:
                        self._values.append(Received(head, buffers))
                        self._cond.notify_all()
                    head, buffers = [], []
        except OSError:  # closed under it (stopped): the end
            pass
        finally:
            del head, buffers  # a value cut short is nobody's
            with self._cond:
                self._closed = True
                self._sock.close()
            try:
                self._ended_cb()
            finally:
                with self._cond:
                    self._over = True
                    self._cond.notify_all()

    def next(self, wait: bool = True) -> Received | None:
        """The next value received, waiting for it with ``wait``; None at the end (the child's
        end closed, or stopped) or, without ``wait``, when none arrived yet."""
        with self._cond:
            while wait and not self._values and not self._over:
                self._cond.wait()
            return self._values.popleft() if self._values else None

    def join(self) -> None:
        """Wait for the end of the child's channel and for ``ended`` (the thread is gone)."""
        self._thread.join()

    def close(self) -> None:
        """Stop reading now (the child is stopped: what it still sends is unwanted) and wait for
        the thread to end."""
        with self._cond:
            if not self._closed:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join()
