"""How many times each tensor of a machine has been written.

One shared counter per tensor name (names hashed into a fixed table: two names in one slot
only count each other's writes too), bumped after every write of the machine's rows by any
process that writes them (its servers for pushes and sparse steps from other machines, its
co-located trainers for their own), and read by trainers of other machines that keep copies
of those rows (``runtime.feature_cache``): an unchanged count means no write since.

The table lives in the machine's shared memory; a bump holds an exclusive ``flock`` on its
file, so that two processes' bumps never collapse into one (writes are rare next to reads).
"""

from __future__ import annotations

import fcntl
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

NAME = "__write_counts__"
SLOTS = 4096


def slot(name: str) -> int:
    """The counter of tensor ``name``."""
    return zlib.crc32(name.encode()) % SLOTS


class WriteCounts:
    """A machine's write counters (``counts``, shared memory) and the file that locks them."""

    def __init__(self, counts: np.ndarray, path: Path) -> None:
        self.counts = counts
        self.path = path
        self._fd: int | None = None

    def bump(self, name: str) -> None:
        """Count one more write of tensor ``name`` (after its rows are written)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self.counts[slot(name)] += 1
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read(self, names: Sequence[str]) -> list[int]:
        """The counts of tensors ``names`` (one aligned word each: read whole)."""
        return [int(self.counts[slot(n)]) for n in names]
