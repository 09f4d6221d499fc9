"""Turn a directed COO edge list into the symmetric, simple CSR graph METIS and KaMinPar need."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import PartitionInputError, PartitionOptionError
from .memory import drop_mapped_pages
from .parallel import parallel_enabled, run_all, sparsetools

INT32_MAX = int(np.iinfo(np.int32).max)

# Edge endpoints are narrowed to int32 in chunks of this many (an 8 MB int64 temporary).
_CHUNK = 1 << 20


def symmetric_csr(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, *, drop_input_pages: bool = False,
    indices_into: Callable[[int], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Build the undirected simple graph of ``src -> dst`` as CSR ``(indptr, indices)``.

    ``indices`` are int32; ``indptr`` is int32, or int64 when the graph has more than 2**31 - 1
    adjacency entries (about a billion undirected edges), each array as narrow as it can be.

    Every edge appears in both directions, self loops are dropped, and each neighbour appears
    once per row; indices come out sorted within each row. Ids must lie in ``[0, num_nodes)``.
    With ``drop_input_pages``, memory-mapped ``src`` and ``dst`` leave the resident set once
    read (:func:`~partitioner.memory.drop_mapped_pages`), before the passes that need the most.
    ``indices_into(nnz)``, when given, returns the int32 array of ``nnz`` entries that becomes
    ``indices`` (e.g. inside a file: :meth:`partitioner.methods.parhip.GraphFile.indices`).

    Raises:
        PartitionInputError: ``src``/``dst`` differ in length, are not integers, or hold ids
            outside ``[0, num_nodes)``.
        PartitionOptionError: more than 2**31 - 1 nodes (the node ids are 32-bit).
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    n = int(num_nodes)
    if src.shape != dst.shape or src.ndim != 1:
        raise PartitionInputError(
            f"src and dst must be 1-D arrays of equal length, got shapes {src.shape} "
            f"and {dst.shape}"
        )
    if src.dtype.kind not in "iu" or dst.dtype.kind not in "iu":
        raise PartitionInputError(
            f"edge endpoints must be integers, got {src.dtype} and {dst.dtype}"
        )
    if not (src.dtype == dst.dtype and src.dtype in (np.int32, np.int64)):
        # One signed dtype for both, so the range check below sees every id as it is (uint64
        # ids past the int64 range turn negative and are reported as such).
        src = src.astype(np.int64)
        dst = dst.astype(np.int64)
    if n < 0:
        raise PartitionOptionError(f"num_nodes must be >= 0, got {n}")
    if n > INT32_MAX:
        raise PartitionOptionError(
            f"{n} nodes do not fit the 32-bit node ids of the symmetric graph (at most "
            f"{INT32_MAX})",
            hint="use --method random (it needs no symmetric graph), or partition a smaller "
                 "graph",
        )
    if n == 0 or src.size == 0:
        if src.size:
            raise PartitionInputError(f"edge list holds node ids, but num_nodes is {n}")
        indices = np.zeros(0, np.int32) if indices_into is None else indices_into(0)
        return np.zeros(n + 1, np.int32), indices

    return _build(src, dst, n, drop_input_pages, indices_into)


def _build(src: np.ndarray, dst: np.ndarray, n: int, drop_input_pages: bool,
           indices_into: Callable[[int], np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """The work of :func:`symmetric_csr` on checked input, in one frame so ``del`` frees.

    Distinct pairs ``lo < hi`` come from a two-pass LSD radix sort made of scipy's COO->CSR
    kernel, a stable counting sort: first by ``hi`` carrying ``lo``, then by ``lo`` carrying
    ``hi``, which leaves each ``lo`` group's ``hi`` values ascending so duplicates sit side by
    side. It is linear and int32 throughout: on 20M edges it is faster than sorting int64 keys
    with numpy or torch's radix sort, and needs about half their memory.

    The pairs, sorted by ``(lo, hi)``, then go through the same kernel reversed ones first. Row
    ``r`` thus receives its neighbours ``< r`` in ascending order, then those ``> r``,
    ascending too: rows come out sorted and free of duplicates.

    On two or more cores the work is split in two. The first pass sorts by ``(lo >= s, hi)``
    for a node id ``s`` near the median of ``lo`` (self loops go to a last key and are
    dropped), which puts the pairs with ``lo < s`` and those with ``lo >= s`` in two slices
    that are sorted and deduplicated on two threads; their outputs are disjoint in ``lo``, so
    one after the other they are all pairs in ``(lo, hi)`` order. The final pass is split by
    row at a node id near the median endpoint, each thread picking its rows' entries out of
    both slices. The result does not depend on either split. Buffers are taken once, on this
    thread, and reused from pass to pass: fresh pages are costly on the VMs this runs on.
    """
    kernels = sparsetools()
    m = src.size
    # Two halves need 2n + 1 keys in the first pass: keep them in int32.
    halves = 2 if parallel_enabled(m) and 2 * n + 1 <= INT32_MAX else 1
    split, row_split = _split_points(src, dst, n) if halves == 2 else (n, n)
    num_keys = halves * n + 1  # the last key collects self loops
    idx = np.int32 if max(m, num_keys) <= INT32_MAX else np.int64
    lo = np.empty(m, idx)
    key = np.empty(m, idx)
    bounds = [0, (m // 2) // _CHUNK * _CHUNK, m] if halves == 2 else [0, m]
    found = run_all([
        functools.partial(_endpoints, src, dst, lo, key, a, b, n, split, num_keys)
        for a, b in itertools.pairwise(bounds)
    ])
    if drop_input_pages:
        drop_mapped_pages(src)
        drop_mapped_pages(dst)
    low = min(f[0] for f in found)
    top = max(f[1] for f in found)
    if low < 0:
        raise PartitionInputError(f"edge list holds negative node id {low}")
    if top >= n:
        raise PartitionInputError(f"edge list holds node id {top}, but num_nodes is {n}")

    # Pass 1: by (lo >= split, hi), carrying lo. scratch is the kernel's unused data array.
    scratch = np.empty(m, np.int8)
    key_ptr = np.empty(num_keys + 1, idx)
    lo_by_hi = np.empty(m, idx)
    kernels.coo_tocsr(num_keys, 1, m, key, lo, scratch, key_ptr, lo_by_hi, scratch)

    # Pass 2 and deduplication, one slice of lo values per thread; lo and key are free now
    # and take the slices' sorted values.
    pairs = run_all([
        functools.partial(_sorted_pairs, lo_by_hi, key_ptr[h * n : (h + 1) * n + 1], lo, key,
                          n, row_split)
        for h in range(halves)
    ])
    del key_ptr
    nnz = 2 * sum(p.lo.size for p in pairs)
    # Past 2**31 entries the row pointers are 64-bit (node ids stay 32-bit), and the backend
    # says whether it takes them (METIS: no).
    wide = nnz > INT32_MAX

    # Final pass, split by row at row_split. Row r gets the pairs with hi == r (their lo
    # ascending: first slice, then second), then those with lo == r (a run of one slice).
    groups = []  # per thread: (rows, cols, mask, count) groups, in the order rows get them
    for first in (True, False)[:halves]:
        reversed_pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray | None, int]] = []
        forward: list[tuple[np.ndarray, np.ndarray, np.ndarray | None, int]] = []
        for p in pairs:
            end = int(np.searchsorted(p.lo, row_split))  # pairs with lo < row_split
            if first:
                reversed_pairs.append((p.hi, p.lo, p.below, p.num_below))
                forward.append((p.lo[:end], p.hi[:end], None, end))
            else:
                mask = None if p.below is None else ~p.below
                reversed_pairs.append((p.hi, p.lo, mask, p.lo.size - p.num_below))
                forward.append((p.lo[end:], p.hi[end:], None, p.lo.size - end))
        groups.append(reversed_pairs + forward)
    del pairs
    counts = [sum(count for *_, count in group) for group in groups]
    starts = [0, counts[0], nnz]
    # Rows and columns are gathered into lo and key, free again, where they fit. Each thread
    # sorts its own slice, whose positions fit 32 bits while the slice does: only a slice of
    # more than 2**31 - 1 entries needs 64-bit buffers (papers100M's 3.2G entries do not).
    final = idx if max(counts) <= INT32_MAX else np.int64
    if nnz > m or final != idx:
        lo, key, scratch = np.empty(nnz, final), np.empty(nnz, final), np.empty(nnz, np.int8)
    indices = np.empty(nnz, np.int32) if indices_into is None else indices_into(nnz)
    ptrs = run_all([
        functools.partial(_rows_to_csr, group, n, lo[a:b], key[a:b], scratch[a:b], indices[a:b])
        for group, a, b in zip(groups, starts, starts[1:], strict=False)
    ])
    del groups, lo, key, scratch, lo_by_hi
    indptr = np.empty(n + 1, np.int64 if wide else np.int32)
    indptr[: row_split + 1] = ptrs[0][: row_split + 1]
    if halves == 2:
        indptr[row_split + 1 :] = ptrs[1][row_split + 1 :].astype(indptr.dtype) + counts[0]
    return indptr, indices


def _split_points(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[int, int]:
    """Node ids near the median smaller endpoint and near the median endpoint, from a sample."""
    step = max(1, src.size // 65536)
    a, b = src[::step], dst[::step]
    lo_median = np.median(np.minimum(a, b))
    id_median = np.median(np.concatenate([a, b]))
    hi = max(n - 1, 1)
    return int(np.clip(lo_median, 1, hi)), int(np.clip(id_median, 1, hi))


def _endpoints(
    src: np.ndarray, dst: np.ndarray, lo: np.ndarray, key: np.ndarray, a: int, b: int, n: int,
    split: int, num_keys: int,
) -> tuple[int, int]:
    """Fill ``lo[a:b]`` with the smaller endpoints and ``key[a:b]`` with the first pass's key.

    The key is ``hi``, plus ``n`` where ``lo >= split``, or ``num_keys - 1`` for a self loop.
    Returns the smallest and largest id seen, for the range check. Works chunk by chunk so
    that no full-size int64 temporary is ever allocated.
    """
    size = min(_CHUNK, b - a)
    tmp = np.empty(size, dtype=src.dtype)
    flag = np.empty(size, dtype=bool)
    low, top = 0, 0
    for start in range(a, b, _CHUNK):
        stop = min(start + _CHUNK, b)
        part = tmp[: stop - start]
        mask = flag[: stop - start]
        lo_part, key_part = lo[start:stop], key[start:stop]
        np.minimum(src[start:stop], dst[start:stop], out=part)
        low = min(low, int(part.min()))
        lo_part[...] = part
        np.maximum(src[start:stop], dst[start:stop], out=part)
        top = max(top, int(part.max()))
        key_part[...] = part
        if split < n:
            np.greater_equal(lo_part, split, out=mask)
            np.add(key_part, n, out=key_part, where=mask)
        np.equal(lo_part, part, out=mask)
        np.copyto(key_part, num_keys - 1, where=mask)
    return low, top


@dataclass
class _Pairs:
    """Distinct pairs of one slice, sorted by ``(lo, hi)``; ``below`` marks ``hi < row_split``."""

    lo: np.ndarray
    hi: np.ndarray
    below: np.ndarray | None
    num_below: int


def _sorted_pairs(
    lo_by_hi: np.ndarray, hi_ptr: np.ndarray, buf_hi: np.ndarray, buf_lo: np.ndarray, n: int,
    row_split: int,
) -> _Pairs:
    """Pass 2 and deduplication of the slice ``hi_ptr[0]:hi_ptr[-1]`` of the first pass.

    ``buf_hi`` and ``buf_lo`` are free arrays as long as ``lo_by_hi``: the same slice of
    them takes the pass's output. The pairs come back in the slice of ``lo_by_hi`` (whose
    values are consumed) and in the array of hi values built here.
    """
    kernels = sparsetools()
    a, b = int(hi_ptr[0]), int(hi_ptr[-1])
    m = b - a
    idx = lo_by_hi.dtype
    if m == 0:
        return _Pairs(np.zeros(0, idx), np.zeros(0, idx), np.zeros(0, bool), 0)
    lo_in = lo_by_hi[a:b]
    hi = np.repeat(np.arange(n, dtype=idx), np.diff(hi_ptr))
    lo_ptr = np.empty(n + 1, idx)
    hi_by_lo, lo_sorted = buf_hi[a:b], buf_lo[a:b]
    kernels.coo_tocsr(n, 1, m, lo_in, hi, lo_in, lo_ptr, hi_by_lo, lo_sorted)
    keep = np.empty(m, dtype=bool)
    keep[0] = True
    np.not_equal(hi_by_lo[1:], hi_by_lo[:-1], out=keep[1:])
    # A group's first entry is new even when it repeats the previous group's last hi.
    group_starts = lo_ptr[:-1]
    keep[group_starts[group_starts < lo_ptr[1:]]] = True
    del group_starts, lo_ptr
    count = int(np.count_nonzero(keep))
    lo_out = np.compress(keep, lo_sorted, out=lo_in[:count])
    hi_out = np.compress(keep, hi_by_lo, out=hi[:count])
    below = hi_out < row_split if row_split < n else None
    num_below = count if below is None else int(np.count_nonzero(below))
    return _Pairs(lo_out, hi_out, below, num_below)


def _rows_to_csr(
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray | None, int]], n: int,
    rows: np.ndarray, cols: np.ndarray, scratch: np.ndarray, out: np.ndarray,
) -> np.ndarray:
    """Counting-sort entries by row into ``out`` (their columns); return the row pointer.

    ``entries`` holds ``(rows, cols, mask, count)`` groups, taken in order (only where ``mask``
    is true when there is one, ``count`` entries each), so equal rows keep the groups' order.
    ``rows``, ``cols`` and ``scratch`` are free arrays as long as ``out``.
    """
    kernels = sparsetools()
    at = 0
    for r, c, mask, count in entries:
        if mask is None:
            rows[at : at + count], cols[at : at + count] = r, c
        else:
            np.compress(mask, r, out=rows[at : at + count])
            np.compress(mask, c, out=cols[at : at + count])
        at += count
    ptr = np.empty(n + 1, rows.dtype)
    if rows.dtype == out.dtype:
        kernels.coo_tocsr(n, 1, at, rows, cols, scratch, ptr, out, scratch)
    else:  # int64 ids (over 2**31 edges in): sort in int64, then narrow
        wide = np.empty(at, rows.dtype)
        kernels.coo_tocsr(n, 1, at, rows, cols, scratch, ptr, wide, scratch)
        out[...] = wide
    return ptr
