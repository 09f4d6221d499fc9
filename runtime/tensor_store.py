"""``TensorStore``: the named tensors of one graph and their rows on every machine (DGL's
key-value client).

A tensor is known by its key (``"TYPE/name"``) and its ``TensorMeta`` (partition policy, row
shape, dtype). This machine's rows are read and written in shared memory through its
``LocalPartition``; the other machines' through their servers, one request per machine per
call (``Router``). ``DistTensor`` handles, the sparse optimizers and ``DistGraph`` go through
the store; none of them reaches into another's state.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from partitioner.partition_book import RangeMap, RangePartitionBook

from .env import RuntimeEnv, feature_cache_bytes, torch_rank_world
from .errors import DistError
from .feature_cache import REPORT_SECONDS, CacheStats, DeviceHits, Place, PulledRows, RemoteRows
from .routing import Router, Share, split_by_owner, split_remote
from .rpc import messages as msg
from .rpc.client import Request
from .sampling import kernels
from .store.local import LocalPartition

log = logging.getLogger(__name__)

# Remote pulls come back in pieces of this size, so the owner's gather of one piece overlaps
# the transfer of the previous one and the copy here overlaps the next (10k x 128 float32 from
# the other machine: 5.2 ms as one message, 3.6 ms in 1 MB pieces; 256 KB and 2 MB were slower).
PULL_PIECE_BYTES = 1 << 20


@dataclass(frozen=True)
class TensorMeta:
    """What a graph knows of one of its named tensors: partition policy, row shape, dtype."""

    policy: str
    row_shape: tuple[int, ...]
    dtype: np.dtype
    persistent: bool = True


@dataclass(frozen=True)
class _Machine:
    """A request that concerns a whole machine (see ``routing.route``)."""

    machine: int


@dataclass(frozen=True)
class _Counts:
    """A machine's write count of a tensor, asked alongside a pull (see ``_from_cache``)."""

    machine: int


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


def _scatter_into(out: np.ndarray, sel: Any) -> Callable[[int, np.ndarray], None]:
    """Sink for a streamed pull: rows ``row0...`` of the reply go to ``out[sel][row0...]``."""
    if isinstance(sel, slice):  # every requested row came from this machine, in order
        def sink(row0: int, rows: np.ndarray) -> None:
            out[row0:row0 + len(rows)] = rows
    else:
        def sink(row0: int, rows: np.ndarray) -> None:
            kernels.copy_rows(rows, out, dst_ids=sel[row0:row0 + len(rows)])
    return sink


class Life:
    """Shared by every handle of one non-persistent tensor in this process: when the last
    handle goes, the store frees the tensor (DGL's ``DistTensor.__del__``)."""

    def __init__(self, store: TensorStore, key: str) -> None:
        f = weakref.finalize(self, _release, weakref.ref(store), key)
        f.atexit = False


def _release(store_ref: weakref.ref, key: str) -> None:
    store = store_ref()
    if store is not None:
        store.free(key)


class TensorStore:
    """The named tensors of one graph: their metas, this machine's rows, the others' rows.

    Args:
        router: the graph's way to the job's machines.
        book: the partition book (which machine owns each row of each type).
        local: this machine's arrays.
        env: the job's runtime environment (None standalone: one process, no servers).
        barrier: the graph's barrier over every trainer of the job.
    """

    def __init__(self, router: Router, book: RangePartitionBook, local: LocalPartition,
                 env: RuntimeEnv | None, barrier: Callable[[], None]) -> None:
        self.router = router
        self.book = book
        self.local = local
        self.env = env
        self.barrier = barrier
        self._metas: dict[str, TensorMeta] = {}
        self._lives: weakref.WeakValueDictionary[str, Life] = weakref.WeakValueDictionary()
        self._unfreed: list[str] = []
        self._written: set[str] = set()  # tensors this process wrote (never pulled ahead)
        self._caches: dict[str, RemoteRows] = {}  # copies of other machines' rows
        self._cache_budget = feature_cache_bytes() if env is not None else 0
        self._reported = -REPORT_SECONDS  # when the caches' counters were last reported
        router.when_idle(self.flush_frees)

    @property
    def standalone(self) -> bool:
        """One process and no servers: every row is this machine's."""
        return self.env is None

    # --- metas ---------------------------------------------------------------------------
    def meta(self, key: str) -> TensorMeta | None:
        """What the store knows of tensor ``key`` (None: no such tensor in this process)."""
        return self._metas.get(key)

    def add(self, key: str, meta: TensorMeta) -> None:
        """Know tensor ``key`` (one whose rows exist on every machine: the features)."""
        self._metas[key] = meta

    def rmap(self, policy: str) -> tuple[RangeMap, str]:
        """The ranges of ``policy``'s kind (nodes or edges) and its type name."""
        kind, typ = policy.split(":", 1)
        return (self.book.nodes, typ) if kind == "node" else (self.book.edges, typ)

    def local_rows(self, key: str) -> np.ndarray:
        """This machine's rows of tensor ``key`` (shared memory in a job)."""
        return self.local.tensor(key)

    # --- life of a tensor ----------------------------------------------------------------
    def create(self, key: str, meta: TensorMeta, init_func: Any) -> None:
        """Make tensor ``key`` on every machine (collective in a job: every trainer calls it;
        each machine's rows are made and filled once)."""
        self.flush_frees()
        typ = meta.policy.split(":", 1)[1]
        rmap, _ = self.rmap(meta.policy)
        t = rmap.type_index(typ)
        starts = rmap.typed_start[:, t]

        def rows_of(m: int) -> np.ndarray:
            n = (int(starts[m + 1] - starts[m]), *meta.row_shape)
            init = init_func(n, _torch_dtype(meta.dtype)) if init_func is not None else None
            if init is None:
                return np.zeros(n, meta.dtype)
            return np.ascontiguousarray(torch.as_tensor(init).numpy().astype(meta.dtype))

        if self.standalone:
            self.local.tensors[key] = rows_of(0)
            self._metas[key] = meta
            return
        # Idempotent create on every machine's main server; exactly one caller per machine
        # hears "created" and fills that machine's rows (init_func runs in the trainer: no
        # code crosses the wire). The first barrier lets every trainer's frees (a name being
        # made again) arrive first, as DGL's; the last keeps everyone from reading too soon.
        self.barrier()
        created: list[int] = []
        self.router.route(
            [_Machine(m) for m in range(rmap.num_parts)],
            lambda it: msg.Create(key, [int(starts[it.machine + 1] - starts[it.machine]),
                                        *meta.row_shape], meta.dtype.str, meta.policy,
                                  exist_ok=True, persistent=meta.persistent),
            place=lambda it, reply: created.append(it.machine) if reply.created else None,
            main_server=True)
        self._metas[key] = meta
        if init_func is not None:
            for m in created:  # (filling it is not a write that stops pulls ahead)
                self._push(key, meta.policy, np.arange(starts[m], starts[m + 1]), rows_of(m),
                          "set")
        self.barrier()

    def life_of(self, key: str) -> Life:
        """The object every handle of non-persistent tensor ``key`` shares (see ``free``)."""
        life = self._lives.get(key)
        if life is None:
            life = self._lives[key] = Life(self, key)
        return life

    def free(self, key: str) -> None:
        """The last handle of non-persistent tensor ``key`` in this process has gone: free it
        (in a job, every machine frees its rows once every trainer has let go)."""
        if self._metas.pop(key, None) is None:
            return
        self.local.tensors.pop(key, None)
        self._caches.pop(key, None)
        if not self.standalone:
            self._unfreed.append(key)
            # Never inside another request's wait (a gc run there), nor on a loader's
            # prefetch thread (a gc run there): the main thread sends it when idle.
            if not self.router.busy and threading.current_thread() is threading.main_thread():
                self.flush_frees()

    def flush_frees(self) -> None:
        """Send the frees that waited for the end of a request (a Delete to every server)."""
        while self._unfreed and self.router.pool is not None:
            key = self._unfreed.pop()
            pool = self.router.pool
            reqs = [Request(m, k, msg.Delete(key)) for m in range(len(pool.machines))
                    for k in range(pool.num_servers)]
            try:
                self.router.call_many(reqs)
            except Exception as e:  # noqa: BLE001 - a free runs from a finalizer: never raise
                # (the connections are closed after exit_client, or a server has gone: the
                # job's end removes its shared memory anyway).
                log.warning("could not free tensor %r: %s", key, e)

    # --- rows ----------------------------------------------------------------------------
    def pull(self, key: str, policy: str, ids: np.ndarray, row_shape: tuple[int, ...],
             dtype: np.dtype) -> np.ndarray:
        """Rows ``ids`` (per-type ids) of tensor ``key``: local ones from shared memory,
        other machines' from the copies kept of them (``runtime.feature_cache``) or their
        servers."""
        got = self.pull_parts(key, policy, ids, row_shape, dtype)
        return got.hits.to_host(got.host) if got.hits.parts else got.host

    def pull_parts(self, key: str, policy: str, ids: np.ndarray, row_shape: tuple[int, ...],
                   dtype: np.dtype) -> PulledRows:
        """As :meth:`pull`, but the rows found in copies kept on the trainer's device are
        left out of the host rows: ``hits`` puts them in once those rows are there."""
        ids = np.asarray(ids, dtype=np.int64)
        rmap, type_name = self.rmap(policy)
        me = self.router.machine_id
        remote, n_mine = split_remote(ids, rmap, type_name, me)
        start = int(rmap.typed_start[me, rmap.type_index(type_name)]) if n_mine else 0
        if not remote:  # all local
            return PulledRows(kernels.gather_rows(self.local.tensor(key), ids - start))
        out = np.empty((len(ids), *row_shape), dtype)
        cache = self._caches.get(key)
        hits: dict[int, tuple[np.ndarray, int]] = {}
        on_device = DeviceHits()
        if cache is not None:
            remote, hits = self._from_cache(cache, key, remote, out, on_device, policy,
                                            row_shape, dtype)
        counts: dict[int, int] = {}

        def place(item: Any, reply: Any) -> None:
            if isinstance(item, _Counts):
                counts[item.machine] = int(reply.counts[0])

        # (Splitting a big pull into requests spread over servers was measured: no faster.
        # The server streams its reply in pieces instead, copied here as they arrive.)
        # This machine's rows are copied in place while the replies are in flight; the
        # write counts of the machines whose rows came from copies are asked alongside.
        mine = [_Machine(me)] if n_mine else []
        self.router.route(
            [*remote, *mine, *(_Counts(m) for m in hits)],
            lambda s: (msg.WriteCountsQuery([key]) if isinstance(s, _Counts)
                       else msg.Pull(key, PULL_PIECE_BYTES, s.local)),
            lambda _: kernels.copy_rows_in_range(self._local_rows(key, rmap, type_name), out,
                                                 ids, start),
            place, sink=lambda s: None if isinstance(s, _Counts) else _scatter_into(out, s.sel))
        if cache is not None and hits:
            stale = self._check_copies(cache, key, policy, ids, out, hits, counts, row_shape,
                                       dtype)
            # The stale machines' rows were pulled again into ``out``: not placed from copies.
            on_device.parts = [p for p in on_device.parts if id(p[0]) not in stale]
        if cache is not None:
            self._report_caches()
        return PulledRows(out, on_device)

    # --- copies of other machines' rows (runtime.feature_cache) ---------------------------
    def want_cache(self, key: str, place: Place | None = None) -> None:
        """Keep copies of other machines' rows of tensor ``key`` from now on, within this
        process's ``feature_cache_gb`` budget (a no-op without one, standalone, or once the
        budget is taken); with ``place``, on the trainer's device."""
        meta = self._metas.get(key)
        if (key in self._caches or meta is None or self.standalone
                or self._cache_budget <= 0 or self.book.num_partitions() < 2):
            return
        row_bytes = max(1, int(np.prod(meta.row_shape, dtype=np.int64)) * meta.dtype.itemsize)
        capacity = self._cache_budget // row_bytes
        if capacity < 1:
            return
        self._cache_budget -= capacity * row_bytes
        self._caches[key] = RemoteRows(int(capacity), place)
        log.info("keeping copies of up to %d rows of %r (%.1f MB, %s)", capacity, key,
                 capacity * row_bytes / 1e6, "on the device" if place else "host memory")

    def cache_stats(self, key: str) -> CacheStats | None:
        """Lookups and hits of the copies kept of tensor ``key`` (None: no copies)."""
        cache = self._caches.get(key)
        return None if cache is None else cache.stats

    def _report_caches(self) -> None:
        """At most every ``REPORT_SECONDS``: this trainer's cache counters to its machine's
        main server, where ``dglctl status`` reads them."""
        now = time.monotonic()
        pool = self.router.pool
        if pool is None or now - self._reported < REPORT_SECONDS:
            return
        self._reported = now  # (two threads racing here send two reports: harmless)
        me = self.router.machine_id
        report = msg.CacheReport(torch_rank_world()[0],
                                 {k: c.counters() for k, c in list(self._caches.items())})
        self.router.call_many([Request(me, 0, report)])

    def _from_cache(self, cache: RemoteRows, key: str, remote: list[Share], out: np.ndarray,
                    on_device: DeviceHits, policy: str, row_shape: tuple[int, ...],
                    dtype: np.dtype) -> tuple[list[Share], dict[int, tuple[np.ndarray, int]]]:
        """Copy the kept rows of ``remote`` into ``out`` (copies on the device: note them in
        ``on_device``, with the very positions array of the result): the shares still to
        pull, and for each machine that gave copies, their positions in ``out`` and the
        write count they were pulled at. Chooses and pulls the rows to keep once the warm-up
        pulls are seen."""
        with cache.lock:
            ready = cache.watch([(s.machine, s.local) for s in remote])
            cache.stats.lookups += sum(len(s.local) for s in remote)
            kept = {m: (cache.ids[m], cache.rows[m], cache.count_at[m], cache.slot_of.get(m))
                    for m in cache.ids}
        if ready:
            self._fill(cache, key, policy, row_shape, dtype)
        left: list[Share] = []
        hits: dict[int, tuple[np.ndarray, int]] = {}
        for s in remote:
            copy = kept.get(s.machine)
            if copy is None:
                left.append(s)
                continue
            found, slots = RemoteRows.find(copy[0], s.local, copy[3])
            positions = s.sel if isinstance(s.sel, np.ndarray) else np.arange(len(out))[s.sel]
            if found.any():
                rows, placed = copy[1], positions[found]
                if isinstance(rows, torch.Tensor):
                    on_device.parts.append((placed, slots, rows))
                else:
                    kernels.copy_rows(rows, out, src_ids=slots, dst_ids=placed)
                hits[s.machine] = (placed, copy[2])
            if not found.all():
                left.append(Share(s.machine, positions[~found], s.local[~found]))
        with cache.lock:
            cache.stats.hits += sum(len(p) for p, _ in hits.values())
        return left, hits

    def _check_copies(self, cache: RemoteRows, key: str, policy: str, ids: np.ndarray,
                      out: np.ndarray, hits: dict[int, tuple[np.ndarray, int]],
                      counts: dict[int, int], row_shape: tuple[int, ...],
                      dtype: np.dtype) -> set[int]:
        """Pull again the rows taken from copies of a machine written since they were pulled
        (and forget those copies); the ``id`` of each such machine's positions array."""
        stale: set[int] = set()
        for m, (positions, count_at) in hits.items():
            if counts.get(m) == count_at:
                continue
            stale.add(id(positions))
            with cache.lock:
                if cache.count_at.get(m) == count_at:
                    cache.drop(m)
                cache.stats.hits -= len(positions)
            log.info("rows of %r on machine %d were written: their copies are dropped", key, m)
            out[positions] = self.pull(key, policy, ids[positions], row_shape, dtype)
        return stale

    def _fill(self, cache: RemoteRows, key: str, policy: str, row_shape: tuple[int, ...],
              dtype: np.dtype) -> None:
        """Pull the rows ``cache`` chose, each machine's after reading its write count."""
        pool = self.router.pool
        if pool is None:
            return
        rmap, type_name = self.rmap(policy)
        t = rmap.type_index(type_name)
        for m, local in cache.choose().items():
            count = int(self.router.call_many([Request(m, pool.pick(m), msg.WriteCountsQuery(
                [key]))])[0].counts[0])
            if count < 0:  # the machine counts no writes: its rows are never copied
                continue
            rows = self.pull(key, policy, local + rmap.typed_start[m, t], row_shape, dtype)
            owned = int(rmap.typed_start[m + 1, t] - rmap.typed_start[m, t])
            with cache.lock:
                cache.keep(m, local, rows, count, owned)

    def _local_rows(self, key: str, rmap: RangeMap, type_name: str) -> np.ndarray:
        """This machine's rows of tensor ``key``, as many as the partition book says it owns
        (rows read in place are never checked one by one)."""
        rows = self.local.tensor(key)
        t, me = rmap.type_index(type_name), self.router.machine_id
        owned = int(rmap.typed_start[me + 1, t] - rmap.typed_start[me, t])
        if len(rows) != owned:
            raise DistError(f"tensor {key!r} has {len(rows)} rows on machine {me}, but the "
                            f"partition book gives it {owned} {type_name!r} ids")
        return rows

    def written(self, key: str) -> bool:
        """Whether this process has written tensor ``key`` (a loader never pulls its rows
        ahead of the step: see ``runtime.batch_reads``)."""
        return key in self._written

    def push(self, key: str, policy: str, ids: np.ndarray, data: np.ndarray, mode: str) -> None:
        """Write (``set``) or accumulate (``add``) rows ``ids`` of tensor ``key``."""
        self._written.add(key)
        self._push(key, policy, ids, data, mode)

    def _push(self, key: str, policy: str, ids: np.ndarray, data: np.ndarray, mode: str) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        self.router.route(
            split_by_owner(ids, *self.rmap(policy)),
            lambda s: msg.Push(key, mode, s.local, np.ascontiguousarray(data[s.sel])),
            lambda s: self.local.write(key, s.local, data[s.sel], mode))

    def count_nonzero(self, key: str) -> int:
        """Non-zero values of tensor ``key``: this machine's counted here, the others' by
        their servers."""
        shares = [_Machine(m) for m in range(self.book.num_partitions())]
        counts: list[int] = []
        self.router.route(
            shares, lambda it: msg.CountNonzero(key),
            lambda it: msg.CountNonzeroReply(int(np.count_nonzero(self.local.tensor(key)))),
            lambda it, reply: counts.append(int(reply.count)))
        return sum(counts)

    def sparse_update(self, kind: str, weight: str, states: list[str], policy: str,
                      ids: np.ndarray, grads: np.ndarray, params: dict, step: str) -> None:
        """One collective optimizer step (DGL's ``step``): every trainer calls it with the
        row gradients it has (maybe none); each row is updated once, from the mean of every
        gradient of that row from every trainer (DGL's all-to-all, then ``update``).

        Each machine's main server gathers the gradients of its rows from every trainer
        (step ``step``), applies the update once all have arrived, then answers them all: a
        row's step reads and writes its weight and state, so one applier per machine keeps
        every step. Standalone mode has one process and applies it in place.
        """
        self._written.add(weight)
        ids = np.asarray(ids, np.int64)
        if self.env is None:
            self.local.sparse_update(kind, weight, states, ids, grads, params)
            return
        pool = self.router.pool
        assert pool is not None, "a job's trainer has its servers"
        total = len(pool.machines) * self.env.num_trainers
        shares = {s.machine: s for s in split_by_owner(ids, *self.rmap(policy))}
        reqs = []
        for m in range(len(pool.machines)):
            s = shares.get(m)
            local = s.local if s is not None else ids[:0]
            # Flat: the wire cannot carry an empty array of several dimensions.
            rows = np.ascontiguousarray(grads[s.sel] if s is not None else grads[:0]).reshape(-1)
            reqs.append(Request(m, 0, msg.SparseStep(step, total, kind, weight, states, params,
                                                     local, rows)))
        self.router.call_many(reqs, max_wait=self.env.barrier_timeout)
