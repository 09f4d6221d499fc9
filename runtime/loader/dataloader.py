"""``DistDataLoader`` and ``DistNodeDataLoader``: mini-batches of ids, sampled into blocks.

Every trainer yields the same number of batches per epoch (the largest count among trainers;
the others wrap around their ids), so DistributedDataParallel never waits for a trainer that
ran out. With ``num_samplers > 0`` sampling runs in separate processes ahead of the trainer.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..batch_reads import BatchReads
from ..context import get_context
from ..env import loader_prefetch
from ..error_file import note_position
from ..sampling.neighbor import NeighborSampler, set_batch_key
from .device_copy import DeviceCopier, plan_for
from .prefetch import BatchPrefetcher
from .sampler_pool import SamplerPool


def _agreed_batches(local: int) -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        t = torch.tensor([local], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())
    return local


class DistDataLoader:
    """DGL's ``DistDataLoader(dataset, batch_size, shuffle, collate_fn, drop_last)``.

    ``dataset`` is an array of ids; each batch is ``collate_fn(ids)`` (the ids themselves
    without one). ``seed`` fixes the shuffling (epoch ``k`` uses ``seed + k``), and the
    sampling draws of batch ``i`` of epoch ``k`` are keyed by ``(k, i)``: a run resumed with
    :meth:`load_state_dict` (or :meth:`resume`) sees exactly the batches the uninterrupted run
    would have seen.
    ``num_workers`` (DGL's DataLoader argument) is the number of sampler processes when
    ``num_samplers`` is not given.

    ``device`` (a CUDA device, e.g. ``runtime.device()``): every batch is copied there, its
    blocks, ids and the feature rows pulled ahead for it, through pinned memory with
    non-blocking copies on a side stream; with prefetch the copies of the next batch run
    while the step computes (``runtime.loader.device_copy``). ``pin_memory`` is accepted and
    implied by ``device`` (without one, batches stay in pageable CPU memory).

    DGL's ``DataLoader`` options are accepted: ``use_prefetch_thread`` is ``prefetch``;
    ``use_alternate_streams`` and ``pin_prefetcher`` are what ``device`` always does (a side
    stream, pinned copies); ``persistent_workers`` is how sampler processes always live (one
    pool per loader, kept across epochs); ``use_uva`` is ignored: the graph and features
    live on the servers, so there is no host graph for the GPU to read in place.

    With 0 sampler processes, ``prefetch`` makes the next batches on a thread while the
    training step runs (``runtime.loader.prefetch``), ``queue_size`` ahead (with sampler
    processes, which make them, the thread takes each batch as it comes and does the rest:
    CSR, features); on by default
    for the library's own samplers (their draws are keyed by the batch, so the batches are
    the same), opt-in for a collate function of your own (it must be thread-safe);
    ``DGLCTL_PREFETCH=0`` in the environment turns the default off (a script unchanged).
    ``prefetch_features`` also pulls, for each batch made ahead, the tensors the step read
    with the last batch's ids (``runtime.batch_reads``); without prefetch those reads are
    still learnt, for the feature cache (``feature_cache_gb``), and made in the step. ``wait_time`` is the seconds the
    trainer waited for batches in the iteration under way (or the last one); ``copy_time``
    the host seconds spent copying batches to ``device`` since the loader was made (0.0 on
    the CPU), on the prefetch thread or in the step.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        shuffle: bool = False,
        collate_fn: Callable[[Any], Any] | None = None,
        drop_last: bool = False,
        queue_size: int | None = None,
        seed: int = 0,
        num_samplers: int | None = None,
        num_workers: int | None = None,
        device: Any = None,
        pin_memory: bool = False,
        prefetch: bool | None = None,
        prefetch_features: bool = True,
        use_prefetch_thread: bool | None = None,
        use_uva: bool = False,
        use_alternate_streams: bool | None = None,
        pin_prefetcher: bool | None = None,
        persistent_workers: bool = True,
    ) -> None:
        # DGL's DataLoader options, each mapped to what it means here (see the class doc).
        if prefetch is None and use_prefetch_thread is not None:
            prefetch = use_prefetch_thread
        del use_uva, use_alternate_streams, pin_prefetcher, persistent_workers, pin_memory
        plan = plan_for(device)
        self._copier = DeviceCopier(plan) if plan is not None else None
        self.device = plan.device if plan is not None else torch.device("cpu")
        if num_samplers is None:
            num_samplers = num_workers
        self.dataset = np.asarray(torch.as_tensor(dataset).numpy(), dtype=np.int64).reshape(-1)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.collate_fn: Callable[[Any], Any] | None = collate_fn
        self.drop_last = drop_last
        self.seed = seed
        self.epoch = 0  # the epoch the next iteration yields
        self._start = 0  # the batch the next iteration starts at (resume)
        self._position = (0, 0)  # (epoch, batches yielded) of the iteration under way
        self.queue_size = queue_size or 4
        self.num_samplers = _num_samplers(num_samplers)
        self.prefetch = _prefetch_default(collate_fn) if prefetch is None else bool(prefetch)
        self._reads = BatchReads(self._copier.plan.keep if self._copier is not None
                                 else None) if prefetch_features else None
        self._prefetcher: BatchPrefetcher | None = None
        self.wait_time = 0.0
        self._workers: SamplerPool | None = None
        n = len(self.dataset)
        local = n // batch_size if drop_last else math.ceil(n / batch_size)
        self.num_batches = _agreed_batches(local)

    def __len__(self) -> int:
        return self.num_batches

    def _epoch_ids(self) -> np.ndarray:
        ids = self.dataset
        if self.shuffle:
            ids = ids[np.random.default_rng(self.seed + self.epoch).permutation(len(ids))]
        n = len(ids)
        local = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        if 0 < n and local < self.num_batches:
            # Another trainer has more batches: wrap around this trainer's ids to match.
            ids = np.resize(ids, self.num_batches * self.batch_size)
        return ids

    def batches(self) -> list[np.ndarray]:
        """The id batches of the next epoch (advances the epoch counter)."""
        ids = self._epoch_ids()
        self.epoch += 1
        out = [ids[i * self.batch_size:(i + 1) * self.batch_size] for i in range(self.num_batches)]
        return [b for b in out if len(b)]

    def resume(self, epoch: int, step: int = 0) -> None:
        """Make the next iteration epoch ``epoch`` from its batch ``step`` on (the batches
        before it are skipped unsampled); the iterations after it go on from ``epoch + 1``.

        The batches, their order and their sampling draws are those the uninterrupted run had
        at the same (epoch, step). Every trainer must resume at the same point (the state a
        collective checkpoint saved), so that they still yield the same number of batches.
        """
        if epoch < 0 or step < 0:
            raise ValueError(f"resume(epoch={epoch}, step={step}): both must be >= 0")
        self.epoch, self._start = int(epoch), int(step)
        self._position = (self.epoch, self._start)

    def state_dict(self) -> dict[str, int]:
        """Where this loader is: ``{"epoch", "step", "seed"}``, the next batch to yield (the
        batches already yielded count as done). Save it with a checkpoint taken after a step
        and give it to :meth:`load_state_dict` to go on from the next batch."""
        epoch, step = self._position
        return {"epoch": epoch, "step": step, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Go on from a :meth:`state_dict`: the next iteration yields its epoch from its step.
        A state of another seed is refused (its batches would not be the saved run's)."""
        if int(state.get("seed", self.seed)) != self.seed:
            raise ValueError(f"loader state of seed {state['seed']}, this loader's seed is "
                             f"{self.seed}: the resumed batches would differ from the saved run's")
        self.resume(int(state["epoch"]), int(state["step"]))

    def __iter__(self) -> Iterator[Any]:
        epoch, start = self.epoch, self._start
        self._start = 0
        batches = self.batches()
        self._position = (epoch, start)
        if self.collate_fn is None:
            items: Iterator[Any] = self._handed(self._moved(
                torch.from_numpy(b) for b in batches[start:]))
        elif self.num_samplers > 0:
            self._stop_prefetch()
            if self._workers is None:
                self._workers = SamplerPool(self.collate_fn, self.num_samplers, self.queue_size)
            items = self._workers.run(batches, epoch_key=epoch, start=start)
            if self.prefetch and self._reads is not None:
                # The sampler processes make the batches; a thread takes each as it comes,
                # builds its CSR and pulls its learnt reads while the step runs.
                self._prefetcher = BatchPrefetcher(_taker(items), range(start, len(batches)),
                                                   self.queue_size, self._reads, self._copier)
                items = iter(self._prefetcher)
            else:
                items = self._handed(self._moved(items))
        elif self.prefetch:
            self._stop_prefetch()
            make = functools.partial(_make_batch, self.collate_fn, batches, epoch)
            self._prefetcher = BatchPrefetcher(make, range(start, len(batches)),
                                               self.queue_size, self._reads, self._copier)
            items = iter(self._prefetcher)
        else:
            items = self._handed(self._moved(_make_batch(self.collate_fn, batches, epoch, i)
                                             for i in range(start, len(batches))))
        return self._counted(items, epoch, start)

    @property
    def copy_time(self) -> float:
        """Host seconds spent copying batches to ``device`` so far (0.0 without one)."""
        return 0.0 if self._copier is None else self._copier.seconds

    def _handed(self, items: Iterator[Any]) -> Iterator[Any]:
        """Without a prefetch thread: each batch handed over as the step takes it, so that
        the step's reads are learnt (and copies kept, with ``feature_cache_gb``), though
        none is pulled ahead."""
        reads = self._reads
        if reads is None:
            return items

        def handed() -> Iterator[Any]:
            try:
                for batch in items:
                    reads.hand_over(batch, {})
                    yield batch
            finally:
                reads.release()
        return handed()

    def _moved(self, items: Iterator[Any]) -> Iterator[Any]:
        """``items`` on the loader's device, each copied in the step (no prefetch thread)."""
        if self._copier is None:
            return items
        copier = self._copier
        return (copier.finish(copier.start(b, {}))[0] for b in items)

    def _counted(self, items: Iterator[Any], epoch: int, start: int) -> Iterator[Any]:
        """Yield ``items``, keeping :attr:`_position` on the batch after the one yielded and
        :attr:`wait_time` on the time spent waiting for them."""
        step = start
        self.wait_time = 0.0
        while True:
            began = time.perf_counter()
            item = next(items, _END)
            self.wait_time += time.perf_counter() - began
            if item is _END:
                break
            note_position(epoch, step)
            step += 1
            self._position = (epoch, step)
            yield item
        self._position = (epoch + 1, 0)

    def _stop_prefetch(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None

    def close(self) -> None:
        """Stop the sampler processes or the prefetch thread (also done when the trainer
        exits)."""
        self._stop_prefetch()  # first: its thread may be taking the sampler processes' batches
        if self._workers is not None:
            self._workers.close()
            self._workers = None


_END = object()


def _make_batch(collate_fn: Callable[[Any], Any] | None, batches: list[np.ndarray],
                epoch: int, i: int) -> Any:
    """Batch ``i`` of ``epoch``: its ids collated, its draws keyed by ``(epoch, i)``."""
    assert collate_fn is not None, "batches of bare ids do not come here"
    set_batch_key((epoch, i))
    try:
        return collate_fn(torch.from_numpy(batches[i]))
    finally:
        set_batch_key(None)


def _taker(batches: Iterator[Any]) -> Callable[[int], Any]:
    """``make(i)`` of a prefetch thread that takes the batches of ``batches`` in order."""
    return lambda _i: next(batches)


def _prefetch_default(collate_fn: Callable[[Any], Any] | None) -> bool:
    """Whether ``collate_fn`` is one of the library's samplers (thread-safe, draws keyed by
    the batch), which a prefetch thread may run, and ``DGLCTL_PREFETCH`` is not ``0``."""
    if collate_fn is None or not loader_prefetch():
        return False
    fn = getattr(collate_fn, "func", None) or getattr(collate_fn, "__func__", None) \
        or collate_fn
    owner = getattr(collate_fn, "__self__", None)
    if isinstance(owner, NeighborSampler):
        return True
    return getattr(fn, "__module__", "").startswith("runtime.loader.") or \
        getattr(type(collate_fn), "__module__", "").startswith("runtime.loader.")


def _num_samplers(requested: int | None) -> int:
    if requested is not None:
        return requested
    env = get_context().env
    return env.num_samplers if env is not None else 0


class DistNodeDataLoader(DistDataLoader):
    """DGL's ``DistNodeDataLoader(g, nids, graph_sampler, batch_size, ...)``.

    Yields ``(input_nodes, output_nodes, blocks)`` per batch of seed nodes. On a heterograph
    ``nids`` is ``{ntype: ids}``: the batches mix the types (as DGL's, which flattens the
    dict) and ``input_nodes`` / ``output_nodes`` are dicts keyed by node type.
    """

    def __init__(self, g: Any, nids: Any, graph_sampler: Any, batch_size: int,
                 shuffle: bool = False, drop_last: bool = False, **kwargs: Any) -> None:
        self.g = g
        self.graph_sampler = graph_sampler
        typed = isinstance(nids, dict)
        if typed:
            book = g.get_partition_book()
            nids = np.concatenate([np.empty(0, np.int64)] + [
                np.asarray(book.map_to_homo_nid(_ids(v), t), np.int64) for t, v in nids.items()])
        # Not a bound method of the loader: that would be a reference cycle, and a loader
        # in a cycle (with its sampler processes) lives until the cyclic collector runs.
        super().__init__(nids, batch_size, shuffle=shuffle,
                         collate_fn=functools.partial(_sample_nodes, g, graph_sampler, typed),
                         drop_last=drop_last, **kwargs)


def _ids(x: Any) -> np.ndarray:
    return np.asarray(torch.as_tensor(x).numpy(), np.int64).reshape(-1)


def split_by_type(g: Any, homo_ids: np.ndarray, kind: str = "node") -> dict[Any, torch.Tensor]:
    """Homogeneous node (or edge) ids -> ``{type: per-type ids}`` (types in the graph's order,
    each type that occurs; ids of a type keep their order)."""
    book = g.get_partition_book()
    if kind == "node":
        tids, per = book.map_to_per_ntype(homo_ids)
        names: list[Any] = g.ntypes
    else:
        tids, per = book.map_to_per_etype(homo_ids)
        names = g.canonical_etypes
    tids, per = np.asarray(tids), np.asarray(per, np.int64)
    return {names[t]: torch.from_numpy(per[tids == t]) for t in np.unique(tids)}


def _sample_nodes(g: Any, graph_sampler: Any, typed: bool, seeds: torch.Tensor) -> Any:
    return graph_sampler.sample(g, split_by_type(g, seeds.numpy()) if typed else seeds)
