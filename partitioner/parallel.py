"""Threads and sort kernels for the partition hot path on small machines.

numpy's take, scipy's sparse kernels and file writes release the GIL, so a small thread pool
keeps both cores of the 2-core machines this runs on busy (gathers split in halves, background
writes, the presort beside the symmetrize); :func:`sparsetools` loads scipy's counting-sort
kernels without scipy.sparse. The heap and mapped pages are :mod:`partitioner.memory`'s.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import TypeVar

import numpy as np

T = TypeVar("T")

_THREADS = max(1, min(4, os.cpu_count() or 1))
_MIN_CHUNK = 1 << 20
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="partitioner")
    return _pool


def take(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` for a 1-D ``idx``, split over threads when ``idx`` is large.

    ``idx`` must hold valid positions: on the threaded path they are not checked (clipped).
    """
    n = len(idx)
    if _THREADS == 1 or n < 2 * _MIN_CHUNK:
        return table[idx]
    out = np.empty((n, *table.shape[1:]), table.dtype)
    bounds = np.linspace(0, n, _THREADS + 1).astype(np.int64)
    # mode="clip": with the default "raise" numpy writes into a fresh copy of ``out`` and
    # copies it back. Callers pass indices that are in range by construction.
    futures = [
        _executor().submit(functools.partial(np.take, table, idx[a:b], 0, out[a:b], mode="clip"))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    for f in futures:
        f.result()
    return out


def submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on the shared pool (used for background writes)."""
    return _executor().submit(fn, *args)


def submit_after(first: Future | None, fn, *args) -> Future:
    """Run ``fn(*args)`` on the pool once ``first`` has finished (whatever its outcome), so
    that two background jobs share the one idle core instead of competing for it."""

    def job():
        if first is not None:
            first.exception()
        return fn(*args)

    return _executor().submit(job)


def run_all(jobs: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``jobs`` concurrently, the first on the calling thread, and return their results.

    The calling thread always does a share of the work, so this never waits on a pool that is
    busy with other tasks (a presort or a background write) before making progress.
    """
    futures = [_executor().submit(job) for job in jobs[1:]]
    try:
        first = jobs[0]()
    finally:
        done = [f.exception() for f in futures]  # wait for all of them even on failure
    for e in done:
        if e is not None:
            raise e
    return [first, *(f.result() for f in futures)]


def parallel_enabled(size: int) -> bool:
    """Whether work on ``size`` items is worth splitting over threads."""
    return _THREADS > 1 and size >= 2 * _MIN_CHUNK


_kernels: ModuleType | None = None
_kernels_lock = threading.Lock()


def sparsetools() -> ModuleType:
    """scipy's ``_sparsetools`` extension (the COO->CSR counting sort the hot path is built on).

    Loaded straight from its file when scipy.sparse is not imported yet: the package import
    (~0.1 s, most of it array-API shims) is not needed for the kernels. Falls back to the
    normal import whenever that does not work out.
    """
    global _kernels
    with _kernels_lock:
        if _kernels is None:
            module = sys.modules.get("scipy.sparse._sparsetools")
            if module is None:
                try:
                    module = _load_sparsetools()
                except (ImportError, OSError):  # take the supported route
                    # Not ``except Exception``: a caller's signal handler may raise an
                    # Exception here (dglctl's Interrupted), which must not be swallowed.
                    module = None
            if module is None:
                from scipy.sparse import _sparsetools

                module = _sparsetools
            _kernels = module
    return _kernels


def _load_sparsetools() -> ModuleType | None:
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("scipy")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "sparse", "_sparsetools" + suffix)
            if os.path.isfile(path):
                ext = importlib.util.spec_from_file_location("scipy.sparse._sparsetools", path)
                if ext is None or ext.loader is None:
                    return None
                module = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(module)
                return module
    return None
