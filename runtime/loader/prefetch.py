"""Batches made ahead on a thread of the trainer's own process (a loader with 0 sampler
processes).

While the training step computes batch k, the thread samples batches k+1, k+2, ... (up to the
queue's depth), builds their blocks' CSR and pulls the rows the step reads with their ids
(``runtime.batch_reads``), so the servers sample and gather while the trainer computes: no
extra process, and the thread mostly waits on its sockets (the sampling kernels and row copies release the GIL). It talks
to the servers over connections of its own (``use_thread_pool``): ZeroMQ sockets are not to
be shared between threads, and the step's own requests are in flight at the same time.

A batch is the same as the one made in the step (its draws are keyed by (epoch, batch) on the
thread that samples it), so a run gives the same losses with and without prefetch.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..batch_reads import BatchReads
from ..context import get_context, use_thread_pool
from ..errors import DistError
from ..rpc.client import ServerPool
from .device_copy import DeviceCopier

_POLL_S = 0.05  # how often a blocked put/get looks at the stop flag and the thread
_live: weakref.WeakSet[BatchPrefetcher] = weakref.WeakSet()


class BatchPrefetcher:
    """Makes ``make(i)`` for each ``i`` of ``indices`` on one thread, at most ``depth``
    batches ahead of the consumer; iterate it to get them in order.

    Args:
        make: builds batch ``i`` (the loader's collate of its ids).
        indices: the batches to make, in order.
        depth: batches made ahead (the bound of the queue).
        reads: the loader's learnt reads, pulled for each batch made.
        copier: copies each batch made (and its rows pulled ahead) to the trainer's
            device on the thread; the trainer's stream waits for it at hand-over.

    The thread connects to the servers on its own (one handshake per epoch), and closes
    its connections when it has made its last batch or is stopped.
    """

    def __init__(self, make: Callable[[int], Any], indices: Sequence[int], depth: int,
                 reads: BatchReads | None, copier: DeviceCopier | None = None) -> None:
        self._make, self._indices, self._reads = make, indices, reads
        self._copier = copier
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        # Started by the first next(): an iteration never begun leaves no thread behind.
        self._thread = threading.Thread(target=self._run, name="dglctl-prefetch", daemon=True)

    def _run(self) -> None:
        pool = None
        try:
            pool = _own_pool()
            use_thread_pool(pool)
        except BaseException as e:  # noqa: BLE001 - raised again in the trainer
            self._queue.put((None, None, e))
            return
        try:
            for i in self._indices:
                if self._stop.is_set():
                    return
                try:
                    batch = self._make(i)
                    _csr_ahead(batch)
                    ready: Any = (self._reads.pull_ahead(batch) if self._reads is not None
                                  else {})
                    if self._copier is not None:  # its copies run while the step computes
                        batch, ready = self._copier.start(batch, ready), None
                    item: tuple[Any, Any, BaseException | None] = (batch, ready, None)
                except BaseException as e:  # noqa: BLE001 - raised again in the trainer
                    item = (None, None, e)
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=_POLL_S)
                        break
                    except queue.Full:
                        continue
                if item[2] is not None:
                    return
        finally:
            use_thread_pool(None)
            if pool is not None:
                pool.close()

    def __iter__(self) -> Iterator[Any]:
        _live.add(self)
        self._thread.start()
        try:
            for _ in self._indices:
                batch, ready, error = self._get()
                if error is not None:
                    raise error
                if self._copier is not None:
                    batch, ready = self._copier.finish(batch)
                if self._reads is not None:
                    self._reads.hand_over(batch, ready)
                yield batch
        finally:
            if self._reads is not None:
                self._reads.release()
            self.close()

    def _get(self) -> tuple[Any, Any, BaseException | None]:
        while True:
            try:
                item: tuple[Any, Any, BaseException | None] = self._queue.get(timeout=_POLL_S)
                return item
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise DistError("the loader's prefetch thread ended without its batch",
                                    hint="a bug: please report it with the trainer's log"
                                    ) from None

    def close(self) -> None:
        """Stop the thread (after the batch it is making) and drop the batches made ahead."""
        self._stop.set()
        if threading.current_thread() is self._thread:
            return  # (a stale iteration collected on the thread itself: it ends on its own)
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                self._thread.join(_POLL_S)
        _live.discard(self)


def _csr_ahead(batch: Any) -> None:
    """Build the CSR of each homogeneous block of ``batch`` (cached on the block) on the
    thread: a layer's sparse matmul needs it, and built in the step it costs the step a sort
    of the edges of every block whose edges came from several machines."""
    for x in batch if isinstance(batch, (tuple, list)) else (batch,):
        for b in x if isinstance(x, (tuple, list)) else (x,):
            if getattr(b, "is_block", False) and b.is_homogeneous() and b.num_edges():
                b.csr()


def stop_all() -> None:
    """Stop every prefetch thread of this process (before its connections close at exit)."""
    for p in list(_live):
        p.close()


def _own_pool() -> ServerPool | None:
    """New connections to the job's servers for a prefetch thread (None standalone). They
    count as a sampler's: they never keep the servers up nor stand for a trainer."""
    ctx = get_context()
    if ctx.pool is None:
        return None
    if stop_all not in ctx.on_exit:  # stop the threads before the trainer's pool closes
        ctx.on_exit.append(stop_all)
    pool = ctx.pool.sibling(f"prefetch-{os.getpid()}", "sampler")
    pool.connect()
    return pool
