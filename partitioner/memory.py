"""The partitioner's memory: how the process heap is kept or handed back between phases, and
how the input's memory-mapped pages leave the resident set once a phase is done with them.

Two regimes, chosen per run by :mod:`partitioner.memory_plan`. Fast: the heap is kept across
the phases (:func:`retained_heap`, :func:`prefault`), since on the small VMs this runs on a
fresh page costs more than the work done on it. Lean: the heap is kept within a phase only, its
free memory goes back to the kernel at each phase's end (:func:`release_free_memory`; 8 % less
time at 50M edges than without a kept heap, the same peak), and the input's mapped pages are
dropped from the resident set once read (:func:`drop_mapped_pages`): they stay in the page
cache, which the kernel reclaims under pressure, so the process holds only what it works on.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import numpy as np

from .parallel import submit

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
    nbytes = min(nbytes, available_memory() // 4)
    if _heap_depth == 0 or nbytes <= 0:
        return None
    block = np.empty(nbytes, np.uint8)
    future = submit(_touch, [block])
    del block
    return future


def available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (0 where it cannot be read): what the kernel
    can give this process without swapping, page cache it can drop included."""
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


def mapping_of(array: np.ndarray) -> mmap.mmap | None:
    """The read-only file mapping ``array``'s memory lies in, or None (heap memory, a
    writable or private mapping: dropping those pages would lose data).

    Follows ``.base`` through views to the ``np.memmap`` the readers create (mode ``"r"``,
    a shared read-only mapping of the input file).
    """
    base: object = array
    read_only = False
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap):
            if base.mode != "r":
                return None
            read_only = True
        base = base.base
    return base if read_only and isinstance(base, mmap.mmap) else None


def drop_mapped_pages(array: np.ndarray, lo: int = 0, hi: int | None = None) -> bool:
    """Drop rows ``lo:hi`` of a memory-mapped input array from this process's resident set.

    The pages stay in the page cache (a later read faults them back in from there, without
    I/O while memory allows), but no longer count against the process: the kernel reclaims
    them under pressure like any cache. Only read-only file mappings are touched (see
    :func:`mapping_of`); returns whether anything was dropped. Whole pages inside the range
    only, so rows sharing a page with the rows beside them are kept.
    """
    mapped = mapping_of(array)
    if mapped is None or array.size == 0 or not array.flags.c_contiguous:
        return False
    row_bytes = array.strides[0] if array.ndim else array.itemsize
    hi = len(array) if hi is None else hi
    if hi <= lo:
        return False
    origin = np.frombuffer(mapped, np.uint8).ctypes.data  # where the mapping begins
    start = array.ctypes.data - origin + lo * row_bytes
    stop = array.ctypes.data - origin + hi * row_bytes
    page = mmap.PAGESIZE
    start = -(-start // page) * page
    stop = stop // page * page
    if stop <= start:
        return False
    mapped.madvise(mmap.MADV_DONTNEED, start, stop - start)
    return True


# Rows gathered per block when a selection of an input array is copied to a shard.
ROW_BLOCK_BYTES = 32 << 20


def row_blocks(array: np.ndarray, rows: np.ndarray, *, drop_pages: bool = False,
               block_bytes: int = ROW_BLOCK_BYTES) -> Iterator[np.ndarray]:
    """``array[rows]`` in blocks of about ``block_bytes``, for a writer to consume one at a time
    (:meth:`partitioner.format.ShardWriter.save_blocks`): the whole selection is never held.

    With ``drop_pages``, the mapped input pages a block read are dropped from the resident set
    once the consumer asks for the next block (:func:`drop_mapped_pages`; a no-op for arrays in
    memory). Rows in ascending order (a part's nodes) make each block's span short.
    """
    row_bytes = max(1, array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64)))
    step = max(1, block_bytes // row_bytes)
    for a in range(0, len(rows), step):
        chunk = rows[a : a + step]
        yield array[chunk]
        if drop_pages and chunk.size:
            drop_mapped_pages(array, int(chunk.min()), int(chunk.max()) + 1)
