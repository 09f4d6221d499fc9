"""Split ids by owner machine, ask the other machines, do this machine's part, merge.

Every distributed operation (pull, push, sparse updates, degrees, find_edges, sampling, tensor
creation) is this one routine, as DGL's ``_distributed_access``: the requests to every other
machine leave first, in one message per machine; this machine's share is done from shared
memory while they are in flight; each share's result is placed as it comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from partitioner.partition_book import RangeMap

from .errors import DistError
from .rpc.client import Request, ServerPool
from .rpc.messages import Message
from .sampling import kernels


class Routed(Protocol):
    """Anything ``route`` can send: it names the machine it belongs to."""

    @property
    def machine(self) -> int: ...


@dataclass(frozen=True)
class Share:
    """The ids one machine owns: where they sit in the caller's ids (``sel``: a slice or
    positions) and their ids local to that machine."""

    machine: int
    sel: slice | np.ndarray
    local: np.ndarray


def split_by_owner(ids: np.ndarray, rmap: RangeMap, type_name: str) -> list[Share]:
    """Group per-type ``ids`` by owner machine (machines in order; a DistError for ids
    outside the type's range)."""
    t = rmap.type_index(type_name)
    only = _one_owner(ids, rmap, t, type_name)
    if only is not None:  # the common local-rows case
        return [Share(only, slice(None), ids - rmap.typed_start[only, t])] if len(ids) else []
    return _shares(*kernels.group_by_range(np.ascontiguousarray(ids, np.int64),
                                           np.ascontiguousarray(rmap.typed_start[:, t])))


def split_remote(ids: np.ndarray, rmap: RangeMap, type_name: str,
                 machine: int) -> tuple[list[Share], int]:
    """The shares of the machines other than ``machine`` (as :func:`split_by_owner`) and how
    many of ``ids`` ``machine`` owns: their positions are not listed, their rows are read in
    place (``kernels.copy_rows_in_range``), so a pull's local rows cost one pass."""
    t = rmap.type_index(type_name)
    only = _one_owner(ids, rmap, t, type_name)
    if only is not None:
        if only == machine:
            return [], len(ids)
        return [Share(only, slice(None), ids - rmap.typed_start[only, t])] if len(ids) else [], 0
    order, local, bounds = kernels.group_others_by_range(
        np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(rmap.typed_start[:, t]),
        machine)
    return _shares(order, local, bounds), len(ids) - int(bounds[-1])


def _one_owner(ids: np.ndarray, rmap: RangeMap, t: int, type_name: str) -> int | None:
    """The machine owning every one of ``ids`` if one does (0 for no ids), else None; a
    DistError for an id outside type ``t``'s range."""
    if not len(ids):
        return 0
    lo, hi = int(ids.min()), int(ids.max())
    total = int(rmap.typed_start[rmap.num_parts, t])
    if lo < 0 or hi >= total:
        raise DistError(f"{type_name!r} id {lo if lo < 0 else hi} is outside [0, {total})")
    m = int(np.searchsorted(rmap.typed_start[1:, t], lo, side="right"))
    return m if m < rmap.num_parts and hi < rmap.typed_start[m + 1, t] else None


def _shares(order: np.ndarray, local: np.ndarray, bounds: np.ndarray) -> list[Share]:
    return [Share(m, order[bounds[m]:bounds[m + 1]], local[bounds[m]:bounds[m + 1]])
            for m in range(len(bounds) - 1) if bounds[m] < bounds[m + 1]]


def route(
    pool: ServerPool | None,
    machine_id: int,
    items: Sequence[Routed],
    remote: Callable[[Any], Message],
    local: Callable[[Any], Any] | None = None,
    place: Callable[[Any, Any], None] | None = None,
    *,
    main_server: bool = False,
    sink: Callable[[Any], Callable[[int, np.ndarray], None]] | None = None,
) -> None:
    """Run one operation over ``items`` (each a machine's share).

    Items of other machines (and, without ``local``, this machine's too) become
    ``remote(item)`` requests, all sent before anything else, to the machine's main server
    with ``main_server`` (operations that must have one applier per machine), else to any of
    its servers. Then ``local(item)`` runs for this machine's items while those are in
    flight, and ``place(item, result)`` receives each local result and each reply.
    ``sink(item)`` receives a streamed reply's pieces as they arrive (pulls).
    """
    remote_items = [it for it in items if local is None or it.machine != machine_id]
    pending = None
    if remote_items:
        if pool is None:
            raise _no_servers()
        reqs = [Request(it.machine, 0 if main_server else pool.pick(it.machine), remote(it),
                        sink=sink(it) if sink is not None else None)
                for it in remote_items]
        pending = pool.send_many(reqs)
    if local is not None:
        for it in items:
            if it.machine == machine_id:
                result = local(it)
                if place is not None:
                    place(it, result)
    if pending is not None:
        for it, reply in zip(remote_items, pending.collect(), strict=True):
            if place is not None:
                place(it, reply)


class Router:
    """One graph's way to the machines of its job: :func:`route` and ``call_many`` through the
    job's servers, from machine ``machine_id``.

    ``pool`` returns the process's server pool (None standalone) at each call, never once for
    all: a forked sampler process replaces its context's pool with connections of its own.

    It counts the requests in flight, so that work which must not run inside another
    request's wait (a tensor freed from a finalizer while a pull waits) is done when the
    outermost one ends: ``when_idle`` registers it, ``route`` runs it afterwards, on the
    main thread only. The count is per thread: a prefetch thread's requests go through
    sockets of its own and never hold up the main thread's idle work.
    """

    def __init__(self, pool: Callable[[], ServerPool | None], machine_id: int) -> None:
        self._pool = pool
        self.machine_id = machine_id
        self._local = threading.local()
        self._when_idle: list[Callable[[], None]] = []

    @property
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @_depth.setter
    def _depth(self, value: int) -> None:
        self._local.depth = value

    @property
    def pool(self) -> ServerPool | None:
        """The server pool of this process (None standalone)."""
        return self._pool()

    @property
    def busy(self) -> bool:
        """Whether a request of this graph is in flight (its caller waits for it)."""
        return self._depth > 0

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after each :meth:`route` that leaves nothing in flight."""
        self._when_idle.append(fn)

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        """Count the requests of the ``with`` body as in flight."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def route(self, items: Sequence[Routed], remote: Callable[[Any], Message],
              local: Callable[[Any], Any] | None = None,
              place: Callable[[Any, Any], None] | None = None, **kwargs: Any) -> None:
        """:func:`route` from this machine, then the idle work when nothing is in flight."""
        with self.in_flight():
            route(self.pool, self.machine_id, items, remote, local, place, **kwargs)
        if not self._depth and threading.current_thread() is threading.main_thread():
            for fn in self._when_idle:
                fn()

    def call_many(self, reqs: list[Request], max_wait: float | None = None) -> list[Any]:
        """Send ``reqs`` and wait for every reply (a DistError without servers)."""
        pool = self.pool
        if pool is None:
            raise _no_servers()
        with self.in_flight():
            return pool.call_many(reqs, max_wait=max_wait)


def _no_servers() -> DistError:
    return DistError("this operation needs the job's servers, and there are none",
                     hint="run through 'dglctl launch' (standalone mode has no servers)")
