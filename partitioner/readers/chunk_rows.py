"""An array stored as row chunks in files, read only where it is sliced: what lets a rank of
the distributed partitioner read its share of a chunked graph and no other chunk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class ChunkRows:
    """Rows ``0..len`` of an array whose chunk ``k`` holds rows ``bounds[k]:bounds[k+1]``.

    ``read(k)`` returns chunk ``k`` (checked by the reader); a slice ``[a:b]`` reads the
    chunks it overlaps and no other, keeping the last chunk read (the next slice of a walk
    in order often starts in it). ``dtype`` and the row shape come from ``like`` when given,
    else from chunk 0 (read once, kept).
    """

    def __init__(self, sizes: list[int], read: Callable[[int], np.ndarray], *,
                 like: np.ndarray | None = None) -> None:
        self.bounds = np.concatenate([[0], np.cumsum(np.asarray(sizes, np.int64))])
        self._read = read
        self._last: tuple[int, np.ndarray] | None = None
        self._like = like
        self.read_chunks: list[int] = []  # every chunk read, in order

    def chunk(self, k: int) -> np.ndarray:
        """Chunk ``k`` whole (the last one read is kept)."""
        if self._last is None or self._last[0] != k:
            self._last = (k, self._read(k))
            self.read_chunks.append(k)
        return self._last[1]

    def _first(self) -> np.ndarray:
        if self._like is None:
            k = int(np.flatnonzero(np.diff(self.bounds))[0]) if len(self) else 0
            self._like = self.chunk(k)[:0]
        return self._like

    @property
    def dtype(self) -> np.dtype:
        return self._first().dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self), *self._first().shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def __getitem__(self, key: Any) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("ChunkRows reads contiguous slices [a:b] only")
        a, b, _ = key.indices(len(self))
        b = max(a, b)
        first = int(np.searchsorted(self.bounds, a, side="right")) - 1
        parts = []
        k = first
        while k < len(self.bounds) - 1 and self.bounds[k] < b:
            lo, hi = int(self.bounds[k]), int(self.bounds[k + 1])
            if hi > lo:
                chunk = self.chunk(k)
                parts.append(np.asarray(chunk[max(a, lo) - lo:min(b, hi) - lo]))
            k += 1
        if not parts:
            return np.empty((0, *self.shape[1:]), self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[0:len(self)]
        return whole if dtype is None else whole.astype(dtype)
