"""Copies of other machines' rows of a tensor, kept by a trainer: the rows its reads asked
for most, up to a memory budget (``feature_cache_gb``).

A cache starts empty and watches the first ``WARMUP_PULLS`` pulls of its tensor; it then
keeps the most-asked other machines' rows that fit the budget (pulled once, in host memory,
or on the trainer's GPU: below).
From then on a pull takes the kept rows from the copy and asks the owners only for the rest.

Correctness first: every machine counts the writes of its rows of each tensor
(``runtime.store.write_counts``). A copy remembers the owner's count read *before* its rows
were pulled; each pull that uses copied rows of a machine asks that machine's count in the
same round of requests, and if a write came since, drops that machine's copies and pulls
those rows again before the pull returns. So a copied row is never older than the owner's
rows were when the pull was asked (a write racing with a pull may or may not be seen, as
without the cache).

A trainer whose loader copies batches to a GPU keeps its copies there (``place``): a pull
then leaves the rows found in them out of its host rows (``PulledRows``), and they are put
into the batch's tensor on the device, after its copy, from the device copies
(``DeviceHits.place``): the hits never cross the bus again.

Every ``REPORT_SECONDS`` at most, a trainer tells its machine's main server its counters
(``CacheReport``); ``dglctl status`` reads them there with the servers' own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

WARMUP_PULLS = 16  # pulls watched before the cache chooses its rows
REPORT_SECONDS = 2.0  # a trainer tells its machine's server its counters at most this often

# Host rows -> the same rows on the trainer's device, whole when it returns.
Place = Callable[[np.ndarray], torch.Tensor]


@dataclass
class CacheStats:
    """Other machines' rows asked for (``lookups``) and found in the copy (``hits``)."""

    lookups: int = 0
    hits: int = 0

    @property
    def hit_rate(self) -> float:
        """``hits / lookups`` (0 before any lookup)."""
        return self.hits / self.lookups if self.lookups else 0.0


@dataclass
class DeviceHits:
    """Rows of a pull found in copies kept on the device, to be put into the pull's rows once
    those are there: ``(positions in the pull, slots in the copy, the copy)`` each."""

    parts: list[tuple[np.ndarray, np.ndarray, torch.Tensor]] = field(default_factory=list)

    def place(self, t: torch.Tensor) -> torch.Tensor:
        """Put the hits into ``t`` (the pull's rows, on the copies' device), on the current
        stream; ``t`` itself."""
        for positions, slots, rows in self.parts:
            if rows.is_cuda:  # the allocator keeps a dropped copy until this stream is past it
                rows.record_stream(torch.cuda.current_stream(rows.device))
            t[torch.from_numpy(positions).to(t.device)] = rows.index_select(
                0, torch.from_numpy(slots).to(rows.device))
        return t

    def to_host(self, out: np.ndarray) -> np.ndarray:
        """Put the hits into ``out`` (the pull's rows on the host); ``out`` itself."""
        for positions, slots, rows in self.parts:
            out[positions] = rows.index_select(0, torch.from_numpy(slots).to(rows.device)
                                               ).cpu().numpy()
        return out


@dataclass
class PulledRows:
    """A pull's rows on the host, but for those found in copies kept on the device."""

    host: np.ndarray
    hits: DeviceHits = field(default_factory=DeviceHits)


class RemoteRows:
    """One tensor's copies of other machines' rows.

    Args:
        capacity: the rows that fit the budget.
        place: keeps the copies on the trainer's device (None: in host memory).
    """

    def __init__(self, capacity: int, place: Place | None = None) -> None:
        self.capacity = capacity
        self.place = place
        self.ids: dict[int, np.ndarray] = {}  # machine -> sorted local ids kept
        # machine -> their rows, in that order (on the device, with ``place``)
        self.rows: dict[int, np.ndarray | torch.Tensor] = {}
        self.count_at: dict[int, int] = {}  # machine -> its write count before the pull
        # machine -> the slot of each of its local ids (-1: not kept), where that map costs
        # no more than the rows kept: a lookup is then one gather, not a binary search.
        self.slot_of: dict[int, np.ndarray] = {}
        self.stats = CacheStats()
        self._seen: list[tuple[int, np.ndarray]] = []
        self._pulls = 0
        self.chosen = False
        # The prefetch thread pulls ahead while the step reads: one of them fills or drops.
        self.lock = threading.Lock()

    def watch(self, shares: list[tuple[int, np.ndarray]]) -> bool:
        """Note one pull's ``(machine, local ids)`` of other machines; True once enough
        pulls were seen to choose the rows to keep (then :meth:`choose`)."""
        if self.chosen:
            return False
        self._seen.extend((m, np.asarray(ids, np.int64)) for m, ids in shares)
        self._pulls += 1
        return self._pulls >= WARMUP_PULLS

    def choose(self) -> dict[int, np.ndarray]:
        """The rows to keep, by machine (sorted local ids): the most asked-for, up to the
        capacity (ties: lower machine, lower id)."""
        self.chosen = True
        seen, self._seen = self._seen, []
        if not seen or self.capacity < 1:
            return {}
        machine = np.concatenate([np.full(len(ids), m, np.int64) for m, ids in seen])
        local = np.concatenate([ids for _, ids in seen])
        key = (machine << 40) | local  # (local ids of a machine are below 2**40)
        uniq, counts = np.unique(key, return_counts=True)
        keep = uniq[np.argsort(-counts, kind="stable")[:self.capacity]]
        by_machine = keep >> 40
        return {int(m): np.sort(keep[by_machine == m] & ((1 << 40) - 1))
                for m in np.unique(by_machine)}

    def keep(self, machine: int, ids: np.ndarray, rows: np.ndarray, count: int,
             machine_rows: int = 0) -> None:
        """Keep ``rows`` of ``ids`` (sorted local ids) of ``machine``, pulled after its write
        count was ``count``; ``machine_rows``: how many rows the machine owns (for the map of
        slots by id, kept where it costs no more than the rows)."""
        kept = rows if self.place is None else self.place(rows)
        self.ids[machine], self.rows[machine], self.count_at[machine] = ids, kept, count
        self.slot_of.pop(machine, None)
        if len(ids) and 0 < 4 * machine_rows <= rows.nbytes and ids[-1] < machine_rows:
            slots = np.full(machine_rows, -1, np.int32)
            slots[ids] = np.arange(len(ids), dtype=np.int32)
            self.slot_of[machine] = slots

    def drop(self, machine: int) -> None:
        """Forget ``machine``'s copies (it was written since they were pulled)."""
        for d in (self.ids, self.rows, self.count_at, self.slot_of):
            d.pop(machine, None)

    @staticmethod
    def find(kept: np.ndarray, local: np.ndarray,
             slot_of: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(found, slots)``: which of ``local`` are among ``kept`` (sorted ids), and where
        in ``kept`` each found one is (by ``slot_of``, the slot of each id, where given)."""
        if slot_of is not None:
            slots = slot_of[local]
            found = slots >= 0
            return found, slots[found].astype(np.int64)
        if not len(kept):
            return np.zeros(len(local), bool), np.empty(0, np.int64)
        pos = np.searchsorted(kept, local)
        pos[pos == len(kept)] = 0
        found = kept[pos] == local
        return found, pos[found]

    def counters(self) -> list[int]:
        """``[lookups, hits, rows kept]``: what a trainer reports for ``dglctl status``."""
        with self.lock:
            return [self.stats.lookups, self.stats.hits, sum(len(i) for i in self.ids.values())]

    @property
    def nbytes(self) -> int:
        """The bytes of the rows kept."""
        return sum(r.nbytes for r in self.rows.values())
