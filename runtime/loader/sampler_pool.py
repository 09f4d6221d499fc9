"""Sampler processes: forked from the trainer, they run ``collate_fn`` on batches ahead of it.

Each worker is a fork of the trainer (so ``collate_fn`` and the graph come along without being
pickled), opens its own connections to the servers, and talks to the trainer over ZeroMQ ipc
sockets in a private folder with typed messages (tasks in; batches, encoded by batch_codec,
out). Workers exit when told, when their pool is dropped (a loader made per epoch must not
leave its workers behind), when the trainer exits, or when the trainer dies (parent-death
signal and a parent check). The trainer never blocks on a dead worker: it checks them while it
waits and raises an error naming the worker and its exit status.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import zmq
from zmq.utils import garbage as zmq_garbage

from ..context import get_context
from ..errors import DistError, PeerTimeout
from ..rpc.messages import Message, array, arrays, decode, encode, message
from ..sampling.neighbor import set_batch_key
from ..store.shm import sampler_dir_prefix
from . import batch_codec


@message("sampler_task")
class SamplerTask(Message):
    """Trainer -> sampler: sample batch ``i`` of epoch ``epoch`` from seed ``ids``."""

    epoch: int
    i: int
    ids: np.ndarray = array()


@message("sampler_stop")
class SamplerStop(Message):
    """Trainer -> sampler: exit."""


@message("sampler_batch")
class SampledBatch(Message):
    """Sampler -> trainer: ``collate_fn``'s result, as ``batch_codec``'s tree and arrays."""

    epoch: int
    i: int
    pid: int
    tree: Any
    arrays: list[np.ndarray] = arrays()


@message("sampler_failed")
class SamplerFailed(Message):
    """Sampler -> trainer: ``collate_fn`` raised; its traceback."""

    epoch: int
    i: int
    pid: int
    error: str


_PR_SET_PDEATHSIG = 1
_INHERITED: list[Any] = []


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent check in the loop still applies
        pass


class _Workers:
    """What stopping a pool needs: its worker pids, sockets and folder (no reference to the
    pool itself, so that a finalizer can hold it while the pool is collected)."""

    def __init__(self, folder: str, tasks: zmq.Socket, results: zmq.Socket) -> None:
        self.folder, self.tasks, self.results = folder, tasks, results
        self.pids: list[int] = []
        self.owner = os.getpid()

    def stop(self) -> None:
        """Stop every worker (stop message, then SIGTERM, then SIGKILL), reap it, and remove
        the sockets and their folder. Only in the process that started them: a forked child
        (another loader's sampler) that happens to collect this pool must leave it alone."""
        if self.tasks.closed or os.getpid() != self.owner:
            return
        with contextlib.suppress(zmq.ZMQError):
            for _ in self.pids:
                self.tasks.send_multipart(encode(SamplerStop()), zmq.NOBLOCK)
        deadline = time.monotonic() + 2.0
        pids = list(self.pids)
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.waitpid(p, os.WNOHANG)[0] == 0]
            time.sleep(0.02)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, sig)
            t_end = time.monotonic() + 1.0
            while pids and time.monotonic() < t_end:
                pids = [p for p in pids if os.waitpid(p, os.WNOHANG)[0] == 0]
                time.sleep(0.02)
        self.pids.clear()
        self.tasks.close(0)
        self.results.close(0)
        shutil.rmtree(self.folder, ignore_errors=True)


class SamplerPool:
    """``num_workers`` forked sampler processes running ``collate_fn`` with prefetch.

    The workers stop on :meth:`close`, when the pool is garbage collected, or at exit."""

    def __init__(self, collate_fn: Callable[[Any], Any], num_workers: int, prefetch: int,
                 timeout: float | None = None) -> None:
        self.num_workers = num_workers
        self.prefetch = max(prefetch, num_workers)
        ctx = get_context()
        # A batch may legitimately take long; a silent *dead* worker is caught by waitpid.
        self.timeout = timeout or (ctx.env.timeout * 30 if ctx.env else 300.0)
        folder = tempfile.mkdtemp(prefix=sampler_dir_prefix(ctx.env.job_id if ctx.env else None))
        os.chmod(folder, 0o700)
        zctx: zmq.Context = zmq.Context.instance()
        self._tasks = zctx.socket(zmq.PUSH)
        self._tasks.setsockopt(zmq.LINGER, 0)
        self._tasks.bind(f"ipc://{folder}/tasks")
        self._results = zctx.socket(zmq.PULL)
        self._results.setsockopt(zmq.LINGER, 0)
        self._results.bind(f"ipc://{folder}/results")
        self._procs = _Workers(folder, self._tasks, self._results)
        # Runs on close(), when the pool is collected, or at exit, whichever comes first.
        # (collate_fn is not kept: only the forked workers need it, and a loader passing its
        # own bound method would otherwise keep itself alive through its pool.)
        self._stop = weakref.finalize(self, self._procs.stop)
        self.pids = self._procs.pids
        parent = os.getpid()
        for _ in range(num_workers):
            pid = os.fork()
            if pid == 0:  # the worker
                code = 1
                try:
                    code = _worker_main(folder, collate_fn, parent)
                finally:
                    os._exit(code)
            self.pids.append(pid)
        self._epoch = 0

    def run(self, batches: list[np.ndarray], epoch_key: int | None = None,
            start: int = 0) -> Iterator[Any]:
        """Yield ``collate_fn(batch)`` for each batch from index ``start`` on, in order,
        sampled ahead by the workers (batch ``i`` keyed by ``(epoch_key, i)``)."""
        self._epoch += 1
        epoch = self._epoch if epoch_key is None else epoch_key
        sent = start
        buffered: dict[int, Any] = {}
        for i in range(start, len(batches)):
            while sent < len(batches) and sent < i + self.prefetch:
                self._tasks.send_multipart(encode(SamplerTask(epoch, sent, batches[sent])))
                sent += 1
            while i not in buffered:
                reply = self._receive()
                if reply.epoch != epoch:
                    continue  # a batch of an epoch the trainer abandoned
                if isinstance(reply, SamplerFailed):
                    raise DistError(f"sampler process {reply.pid} failed on batch "
                                    f"{reply.i}:\n{reply.error}")
                buffered[reply.i] = batch_codec.decode(reply.tree, reply.arrays)
            yield buffered.pop(i)

    def _receive(self) -> SampledBatch | SamplerFailed:
        deadline = time.monotonic() + self.timeout
        while True:
            if self._results.poll(200):
                return decode(self._results.recv_multipart(copy=False))[0]  # type: ignore
            self._check_workers()
            if time.monotonic() > deadline:
                raise PeerTimeout(f"no batch from the {self.num_workers} sampler processes "
                                  f"{self.pids} within {self.timeout:.0f}s")

    def _check_workers(self) -> None:
        for pid in self.pids:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.pids.remove(pid)
                how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                       else f"exit code {os.WEXITSTATUS(status)}")
                self.close()
                raise DistError(f"sampler process {pid} died ({how})",
                                hint="see its output above; the trainer stops rather than hang")

    def close(self) -> None:
        """Stop every worker (stop message, then SIGTERM, then SIGKILL) and remove the sockets."""
        self._stop()


def _worker_main(folder: str, collate_fn: Callable[[Any], Any], parent: int) -> int:
    """The sampler loop: fresh sockets and server connections, then batches until stopped."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    torch.set_num_threads(1)
    # pyzmq's zero-copy garbage collector drops the parent's socket on its first use in a
    # child; collecting it would close a socket of the parent's context (and warn "Unclosed
    # socket" in the trainer's output). Keep it referenced, as the parent's sockets below.
    _INHERITED.append(getattr(zmq_garbage.gc, "_push", None))
    ctx = get_context()
    if ctx.pool is not None:
        # The parent's sockets belong to the parent; a forked child makes its own.
        old = ctx.pool
        # Keep the parent's sockets referenced until os._exit: closing or collecting them in
        # the child would touch the parent's ZeroMQ context, which has no threads here.
        _INHERITED.append(old)
        ctx.pool = old.sibling(f"sampler-{os.getpid()}", "sampler")
        ctx.pool.connect()
    zctx = zmq.Context()
    tasks = zctx.socket(zmq.PULL)
    tasks.connect(f"ipc://{folder}/tasks")
    results = zctx.socket(zmq.PUSH)
    results.setsockopt(zmq.LINGER, 1000)
    results.connect(f"ipc://{folder}/results")
    try:
        while True:
            if os.getppid() != parent:
                return 0
            if not tasks.poll(500):
                continue
            task, _ = decode(tasks.recv_multipart(copy=False))
            if isinstance(task, SamplerStop):
                return 0
            assert isinstance(task, SamplerTask)
            reply: Message
            try:
                set_batch_key((task.epoch, task.i))
                tree, out = batch_codec.encode(collate_fn(torch.from_numpy(np.array(task.ids))))
                reply = SampledBatch(task.epoch, task.i, os.getpid(), tree, out)
            except Exception:  # noqa: BLE001 - reported to the trainer with the traceback
                reply = SamplerFailed(task.epoch, task.i, os.getpid(), traceback.format_exc())
            results.send_multipart(encode(reply))
    finally:
        tasks.close(0)
        results.close()
        if ctx.pool is not None:
            ctx.pool.close()
        zctx.term()
