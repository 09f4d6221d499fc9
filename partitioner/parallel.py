"""Two-core helpers for the partition hot path: split gathers across threads, write in background.

numpy's take and file writes release the GIL, so a small thread pool keeps both cores busy
after METIS returns (the machines this runs on often have only a few cores).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

_THREADS = max(1, min(4, os.cpu_count() or 1))
_MIN_CHUNK = 1 << 20
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="partitioner")
    return _pool


def take(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` for a 1-D ``idx``, split over threads when ``idx`` is large."""
    n = len(idx)
    if _THREADS == 1 or n < 2 * _MIN_CHUNK:
        return table[idx]
    out = np.empty((n, *table.shape[1:]), table.dtype)
    bounds = np.linspace(0, n, _THREADS + 1).astype(np.int64)
    futures = [
        _executor().submit(np.take, table, idx[a:b], 0, out[a:b])
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    for f in futures:
        f.result()
    return out


def submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on the shared pool (used for background writes)."""
    return _executor().submit(fn, *args)
