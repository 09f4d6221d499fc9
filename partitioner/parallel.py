"""Helpers for the partition hot path on small machines: threads, memory, sort kernels.

numpy's take, scipy's sparse kernels and file writes release the GIL, so a small thread pool
keeps both cores of the 2-core machines this runs on busy (gathers split in halves, background
writes, the presort beside the symmetrize). The process heap is kept across the phases
(:func:`retained_heap`, :func:`prefault`), since a fresh page costs more there than the work
done on it; :func:`sparsetools` loads scipy's counting-sort kernels without scipy.sparse.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
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


# glibc mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
# Settings left behind: glibc's default mmap count, and the mmap/trim thresholds its dynamic
# adjustment reaches in a program that frees large arrays (setting any of them ends that
# adjustment, which cannot be switched back on).
_RESTORED = ((_M_MMAP_MAX, 65536), (_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 64 << 20))
_heap_lock = threading.Lock()
_heap_depth = 0


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc only (not musl)
        return libc
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def retained_heap() -> Iterator[None]:
    """Inside the block, memory freed by large arrays stays in the process heap for reuse.

    glibc serves every allocation above 32 MB with a fresh ``mmap`` and unmaps it on free, so
    each 80 MB temporary of the partition path (and METIS's own work arrays) is page-faulted
    in again. On the 2-core VMs this runs on a first-touched page is slow to provide (the
    host backs it on demand): that kernel time was ~2.5 s of an 11 s run. With mmap off and
    trimming off, freed blocks are reused as they are (allocations made on worker threads
    above 64 MB still use mmap: take large buffers on the calling thread). On leaving, mmap
    is switched back on and the free memory is handed back (``malloc_trim``). A no-op off
    glibc; nesting and concurrent use keep the settings until the last block ends.
    """
    global _heap_depth
    libc = _glibc()
    if libc is None:
        yield
        return
    with _heap_lock:
        _heap_depth += 1
        if _heap_depth == 1:
            libc.mallopt(_M_MMAP_MAX, 0)
            libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    try:
        yield
    finally:
        with _heap_lock:
            _heap_depth -= 1
            if _heap_depth == 0:
                for param, value in _RESTORED:
                    libc.mallopt(param, value)
                libc.malloc_trim(0)


def retain_freed_memory(limit: int = 256 << 20, large: bool = False) -> None:
    """For the rest of the process, keep up to ``limit`` bytes of freed heap for reuse.

    glibc hands the top of the heap back to the kernel once more than a few MB of it are
    free (its dynamic trim threshold), and serves every allocation above 32 MB with a fresh
    mmap, so a process that repeatedly allocates and frees arrays page-faults them in again
    each time; on the project's VMs a first-touched page is slow to provide. A graph server
    does this with its reply pieces (a 10k x 128 float32 pull: 4.6-4.9 ms, 3.6-3.9 ms with
    this setting); a trainer with each step's features and activations, tens of MB each
    (fetching 118k x 128 float32 rows and one op on them: 45 ms, 23 ms with ``large``).

    Allocations up to 32 MB come from the heap; with ``large``, all of them do (mmap off).
    Set ``DGLCTL_RETAIN_FREED_MEMORY=0`` to keep glibc's defaults. A no-op off glibc.
    """
    libc = _glibc()
    if libc is None or os.environ.get("DGLCTL_RETAIN_FREED_MEMORY", "1") == "0":
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    if large:
        libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, int(limit))


def release_free_memory() -> None:
    """Hand the heap's free memory back to the kernel now (glibc only; a no-op elsewhere)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def prefault(nbytes: int) -> Future | None:
    """Have a worker thread fault in ``nbytes`` of heap memory, then free it for reuse.

    Only inside :func:`retained_heap`, where the freed block stays in the process heap: the
    allocations that follow (METIS's work arrays, the relabel and write buffers) then land on
    pages the kernel has already provided instead of faulting each one in on the critical path.
    The block is taken here, on the calling thread, so it lands in that thread's heap.
    Returns the worker's future (None when there was nothing to do).
    """
    nbytes = min(nbytes, _available_memory() // 4)
    if _heap_depth == 0 or nbytes <= 0:
        return None
    block = np.empty(nbytes, np.uint8)
    future = _executor().submit(_touch, [block])
    del block
    return future


def _available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (0 where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _touch(holder: list[np.ndarray]) -> None:
    block = holder.pop()
    block[::4096] = 0  # one write per page faults it in
    del block


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
                except Exception:  # noqa: BLE001 - any surprise: take the supported route
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
