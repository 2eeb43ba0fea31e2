"""The per-rank map on an existing Dask distributed cluster (``--scheduler ADDRESS``).

Dask schedules, retries and balances the tasks; this module only submits one
:func:`~.summary.summarize_rank` task per rank and side and turns what can go wrong into one line
(exit 2) in bounded time instead of a hang or a traceback:

* no Dask installed → how to install the ``cluster`` extra;
* a scheduler that cannot be reached → after at most :data:`CONNECT_TIMEOUT_S`;
* no worker, a worker without perfcmp-tui (or another version), a worker that cannot read the
  rank folders (they must see them at the same path as this machine) → checked on every worker
  before any rank is submitted;
* a worker that dies while loading a rank → Dask moves the task elsewhere; once it has killed
  ``distributed.scheduler.allowed-failures`` workers Dask gives up on it (``KilledWorker``) and so
  do we; with no worker left at all for :data:`NO_WORKERS_S`, too.

A rank that fails to load on a worker comes back as a :class:`~.summary.RankFailure` value and is
reported by name; the other ranks still compare.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from .. import __version__
from ..errors import InputError, UsageError
from .summary import RankOutcome, RankTask, summarize_rank

INSTALL_HINT = "pip install 'perfcmp-tui[cluster]'"
#: Seconds to reach the scheduler.
CONNECT_TIMEOUT_S = 10.0
#: Seconds the scheduler may have no worker at all (before the map, or after every worker died).
NO_WORKERS_S = 20.0
#: Seconds between checks on the cluster while waiting for results.
POLL_S = 0.5


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(f"--scheduler needs Dask distributed, which is not installed: "
                         f"{INSTALL_HINT}") from None
    return distributed


def map_on_dask(tasks: Sequence[RankTask], address: str) -> Iterator[RankOutcome]:
    """Each task's outcome as it completes on the cluster at ``address``."""
    distributed = _distributed()
    _reachable(address)
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, ValueError, TimeoutError) as exc:
        raise InputError(None, f"Dask scheduler {address}: cannot connect ({_reason(exc)})") from None
    futures: list[Any] = []
    try:
        _check_workers(client, address, sorted({t.path for t in tasks}))
        run = uuid.uuid4().hex[:8]
        futures = client.map(summarize_rank, list(tasks), pure=False,
                             key=[f"perfcmp-{t.side}-rank{t.rank}-{run}" for t in tasks])
        yield from _results(distributed, client, address, dict(zip(futures, tasks)))
    finally:
        if futures:
            client.cancel(futures)
        client.close(timeout=CONNECT_TIMEOUT_S)


def _reachable(address: str) -> None:
    """Fail fast on a TCP scheduler nobody listens on (Dask would retry until its timeout, then
    leave a client behind whose clean-up stalls the interpreter's exit)."""
    from distributed.comm import get_address_host_port, parse_address

    try:
        if parse_address(address)[0] != "tcp":
            return  # tls, ucx, inproc …: left to Dask
        host, port = get_address_host_port(address)
    except ValueError as exc:
        raise InputError(None, f"Dask scheduler {address}: not an address ({exc})") from None
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise InputError(None, f"Dask scheduler {address}: cannot connect ({_reason(exc)})") from None


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def probe(paths: list[str]) -> dict[str, object]:
    """Run on every worker before the map: its perfcmp-tui version and the rank paths it cannot
    read."""
    return {"version": __version__,
            "unreadable": [p for p in paths if not os.access(p, os.R_OK)]}


def _check_workers(client: Any, address: str, paths: list[str]) -> None:
    try:
        client.wait_for_workers(1, timeout=NO_WORKERS_S)
    except TimeoutError:
        raise InputError(None, f"Dask scheduler {address} has no workers (waited "
                               f"{NO_WORKERS_S:.0f} s)") from None
    answers = client.run(probe, paths, on_error="return")
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            raise InputError(None, f"Dask worker {worker} cannot run perfcmp-tui "
                                   f"({type(answer).__name__}: {_reason(answer)}): install "
                                   f"perfcmp-tui {__version__} on every worker")
        if answer["version"] != __version__:
            raise InputError(None, f"Dask worker {worker} runs perfcmp-tui {answer['version']}, "
                                   f"this is {__version__}: install the same version everywhere")
        if answer["unreadable"]:
            first = answer["unreadable"][0]
            more = len(answer["unreadable"]) - 1
            raise InputError(first, f"the Dask worker {worker} cannot read it"
                                    + (f" (nor {more} more rank paths)" if more else "")
                                    + ": workers must see the rank folders at the same path as "
                                      "this machine")


def _results(distributed: Any, client: Any, address: str,
             pending: dict[Any, RankTask]) -> Iterator[RankOutcome]:
    ready = distributed.as_completed(list(pending), loop=client.loop)
    idle_since: float | None = None
    while pending:
        done = ready.next_batch(block=False)
        for future in done:
            yield _outcome(distributed, future, pending.pop(future), address)
        if done or not pending:
            idle_since = None
            continue
        time.sleep(POLL_S)
        if client.status != "running":
            raise InputError(None, f"lost the connection to the Dask scheduler {address} "
                                   f"({len(pending)} rank loads unfinished)")
        if client.scheduler_info().get("workers"):
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > NO_WORKERS_S:
            raise InputError(None, f"Dask scheduler {address}: every worker is gone (died or "
                                   f"stopped) with {len(pending)} rank loads unfinished")


def _outcome(distributed: Any, future: Any, task: RankTask, address: str) -> RankOutcome:
    try:
        return future.result()
    except distributed.KilledWorker:
        raise InputError(task.path, f"{task.side} rank {task.rank}: the Dask workers loading it "
                                    f"died (out of memory? the workers' logs say why); gave up "
                                    f"after distributed.scheduler.allowed-failures") from None
    except distributed.client.FutureCancelledError as exc:
        raise InputError(None, f"Dask scheduler {address} cancelled the load of {task.side} rank "
                               f"{task.rank} ({_reason(exc)})") from None
