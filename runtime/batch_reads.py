"""Rows a training step reads with its batch's node ids, pulled before the step asks for them.

A loader that makes batches ahead (``DistDataLoader``'s prefetch thread) hands each batch to
the trainer through :meth:`BatchReads.hand_over`. A ``DistTensor`` read whose ids are one of
that batch's id tensors (the very object: ``input_nodes``, ``seeds``,
``blocks[0].srcdata[NID]``, ``blocks[-1].dstdata[NID]``, or one node type's of these) is
learnt, and from then on the loader's thread pulls that tensor's rows for every batch it
makes (:meth:`pull_ahead`) while the step before runs; the step's read takes them
(:func:`take`) without a round trip.

Only tensors this process has never written are pulled ahead (nor taken once it has). Rows
another trainer writes during the step before may be read one step early: without prefetch
the same read races with that write too (trainers' steps are not ordered against each
other's writes, in DGL either). A loader built with ``prefetch_features=False`` leaves every
read to the step.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .feature_cache import Place, PulledRows

NID = "_ID"  # runtime.sampling.block.NID (not imported: this module sits below sampling)

# Where a batch keeps an id tensor: ("item", i), ("item", i, ntype), ("src", ntype),
# ("dst", ntype).
Slot = tuple[Any, ...]


def id_slots(batch: Any) -> dict[Slot, torch.Tensor]:
    """The id tensors of a batch by slot: top-level tensors of a tuple or list batch (and
    the per-type tensors of a top-level dict), the first block's source ids and the last
    block's destination ids of each node type."""
    items = batch if isinstance(batch, (tuple, list)) else (batch,)
    slots: dict[Slot, torch.Tensor] = {}
    blocks = None
    for i, x in enumerate(items):
        if isinstance(x, torch.Tensor):
            slots[("item", i)] = x
        elif isinstance(x, dict):
            slots.update({("item", i, t): v for t, v in x.items() if isinstance(v, torch.Tensor)})
        elif isinstance(x, (tuple, list)) and x and getattr(x[0], "is_block", False):
            blocks = x
        elif getattr(x, "is_block", False) and blocks is None:
            blocks = items
    if blocks:
        first, last = blocks[0], blocks[-1]
        slots.update({("src", t): first.srcnodes[t].data[NID] for t in first.ntypes})
        slots.update({("dst", t): last.dstnodes[t].data[NID] for t in last.ntypes})
    return slots


@dataclass
class _Held:
    """The batch the trainer holds: its id tensors and the rows pulled ahead for it."""

    owner: BatchReads
    slots: dict[int, tuple[Slot, torch.Tensor]]  # id(tensor) -> (slot, tensor: kept alive)
    ready: dict[tuple[str, Slot], np.ndarray | PulledRows | torch.Tensor] = field(
        default_factory=dict)


_held: _Held | None = None  # the main thread's batch (reads come from the training step)


class BatchReads:
    """One loader's learnt reads: which tensor the step reads with which id slot."""

    def __init__(self, place: Place | None = None) -> None:
        self._learnt: dict[tuple[str, Slot], Any] = {}  # (key, slot) -> a DistTensor
        self._lock = threading.Lock()
        self._place = place  # where the loader's batches go: the copies go there too

    def learn(self, tensor: Any, slot: Slot) -> None:
        """The step read ``tensor`` with the batch's ``slot`` ids: pull it ahead from now on
        (and keep copies of its most-read rows of other machines, with a
        ``feature_cache_gb`` budget: ``runtime.feature_cache``; on the loader's device with
        ``place``)."""
        with self._lock:
            new = (tensor.kvstore_key, slot) not in self._learnt
            self._learnt.setdefault((tensor.kvstore_key, slot), tensor)
        if new:
            tensor.store.want_cache(tensor.kvstore_key, self._place)

    def pull_ahead(self, batch: Any) -> dict[tuple[str, Slot], np.ndarray | PulledRows]:
        """Pull every learnt read of ``batch`` (on the loader's thread): ``{(key, slot):
        rows}`` (``PulledRows`` where some were found in copies kept on the device: the
        loader's copier puts them in)."""
        with self._lock:
            learnt = list(self._learnt.items())
        if not learnt:
            return {}
        slots = id_slots(batch)
        out = {}
        for (key, slot), tensor in learnt:
            ids = slots.get(slot)
            if ids is not None and not tensor.store.written(key):
                got = tensor.read_parts(ids)
                out[(key, slot)] = got if got.hits.parts else got.host
        return out

    def hand_over(self, batch: Any,
                  ready: dict[tuple[str, Slot], np.ndarray | PulledRows | torch.Tensor]
                  ) -> None:
        """The trainer now holds ``batch`` (with the rows pulled ahead for it: arrays, or
        tensors on the batch's device)."""
        global _held
        _held = _Held(self, {id(t): (s, t) for s, t in id_slots(batch).items()}, dict(ready))

    def release(self) -> None:
        """The trainer holds none of this loader's batches any more."""
        global _held
        if _held is not None and _held.owner is self:
            _held = None


def take(tensor: Any, ids: Any) -> torch.Tensor | None:
    """Rows of ``tensor`` for ``ids`` pulled ahead, if ``ids`` is an id tensor of the batch
    the trainer holds (learning the read if so); None: read them now."""
    held = _held
    if held is None or threading.current_thread() is not threading.main_thread():
        return None
    found = held.slots.get(id(ids))
    if found is None or found[1] is not ids:
        return None
    key = tensor.kvstore_key
    if tensor.store.written(key):
        return None
    held.owner.learn(tensor, found[0])
    ready = held.ready.pop((key, found[0]), None)
    if ready is None or isinstance(ready, torch.Tensor):  # (on the batch's device)
        return ready
    if isinstance(ready, PulledRows):  # (a loader without a copier: never made so)
        return torch.from_numpy(ready.hits.to_host(ready.host))
    return torch.from_numpy(ready)
