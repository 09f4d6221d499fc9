"""Compiled (numba) kernels for the sampling hot path, bit for bit equal to the numpy code.

Sampling without replacement draws, for every high-degree seed, ``fanout`` distinct offsets
with Floyd's algorithm; in numpy that is a loop over the fanout with an O(fanout) duplicate
check per draw on every seed at once, plus temporaries of (seeds x fanout). Compiled, it is
one pass over the seeds. Relabeling a block's node ids in order of first appearance is a
plain sequential loop compiled, where numpy needs ``minimum.at`` (slow) and several passes.
Grouping ids by owner machine is a counting sort in two passes (numpy needs a sort).
Copying rows by index (feature pulls, on the server and in the trainer) is a compiled loop
that asks for the row a few ids ahead before copying the current one: numpy's fancy
indexing copies one row at a time and waits on every cache miss, which is most of the time
for random rows of a large array.

The draws use the same keyed randomness as :mod:`runtime.sampling` (splitmix64 of the seed's
key and the draw number), so the kernels return exactly what the numpy code returns (tested
on random inputs); ``runtime.sampling`` keeps the numpy code as the reference.
``cache=True`` keeps the compiled code on disk, so only the first process compiles;
``nogil=True`` lets a loader's prefetch thread sample while the training step runs.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True, inline="always")
def _uniform(key, draw):
    """runtime.sampling.uniform for one key and draw number (uint64 arithmetic wraps)."""
    x = key + np.uint64(draw) * _GOLDEN
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    x = x ^ (x >> _S31)
    return np.float64(x >> _S11) * _INV53


@njit(cache=True, nogil=True)
def sample_uniform(start, deg, keys, fanout) -> tuple[np.ndarray, np.ndarray]:
    """``(seed_idx, pos)`` of ``runtime.sampling.sample_etype`` without replacement, weights
    or exclusions, for ``fanout >= 0``: every seed keeps min(deg, fanout) edges, grouped by
    seed; a seed with more edges keeps Floyd's draws, sorted."""
    n = len(deg)
    total = 0
    for i in range(n):
        total += min(deg[i], fanout)
    seed_idx = np.empty(total, np.int64)
    pos = np.empty(total, np.int64)
    chosen = np.empty(max(fanout, 1), np.int64)
    o = 0
    for i in range(n):
        d = deg[i]
        s = start[i]
        if d <= fanout:
            for q in range(d):
                seed_idx[o] = i
                pos[o] = s + q
                o += 1
            continue
        k = keys[i]
        for c in range(fanout):
            j = d - fanout + c
            t = np.int64(_uniform(k, c) * (j + 1))
            for q in range(c):
                if chosen[q] == t:
                    t = j
                    break
            chosen[c] = t
        for c in range(1, fanout):  # insertion sort: fanouts are small, no allocation
            v = chosen[c]
            q = c - 1
            while q >= 0 and chosen[q] > v:
                chosen[q + 1] = chosen[q]
                q -= 1
            chosen[q + 1] = v
        for c in range(fanout):
            seed_idx[o] = i
            pos[o] = s + chosen[c]
            o += 1
    return seed_idx, pos


@njit(cache=True, nogil=True)
def relabel_first_seen(mark, ids, empty) -> tuple[np.ndarray, np.ndarray]:
    """``(unique ids in first-appearance order, local index of every id)``; ``mark`` is a
    scratch array over the id range holding ``empty`` everywhere, and is left that way."""
    n = len(ids)
    local = np.empty(n, np.int64)
    uniq = np.empty(n, np.int64)
    k = 0
    for p in range(n):
        v = ids[p]
        m = mark[v]
        if m == empty:
            mark[v] = k
            uniq[k] = v
            local[p] = k
            k += 1
        else:
            local[p] = m
    for q in range(k):
        mark[uniq[q]] = empty
    return uniq[:k].copy(), local


# How many ids ahead a row copy prefetches: enough to keep several cache misses in flight.
# Measured on 10k random 512-byte rows of a 512 MB shared array: numpy fancy indexing
# 1.15-2.2 ms, this loop without prefetching 0.80-0.96 ms, with it 0.58-0.66 ms (4 and 8
# ahead were alike, 16 and 32 slower; reading a word of the row ahead instead of
# prefetching it: 0.76-0.82 ms).
_AHEAD = 8


@intrinsic
def _prefetch(typingctx, arr, flat_index):
    """Ask the CPU to bring ``arr.flat[flat_index]`` (C-contiguous ``arr``) into cache."""
    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [byte_ptr], ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]))
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), byte_ptr)
        # read, keep in every cache level, data (not instructions)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(arr, flat_index), codegen


@njit(cache=True, boundscheck=False, nogil=True)
def _copy_rows(src, src_ids, dst, dst_ids, gather, scatter):
    """``dst[dst_ids[i]] = src[src_ids[i]]`` for every i, on C-contiguous 2-D arrays of raw
    row words; without ``gather`` ``src_ids[i]`` reads as i, without ``scatter`` ``dst_ids[i]``
    does. Returns the position of the first id outside its array's rows (-1 when none is)."""
    n = len(src_ids) if gather else len(dst_ids) if scatter else len(src)
    w = src.shape[1]
    ns, nd = src.shape[0], dst.shape[0]
    for i in range(n):
        r = src_ids[i] if gather else i
        o = dst_ids[i] if scatter else i
        if r < 0 or r >= ns or o < 0 or o >= nd:
            return i
        if gather and i + _AHEAD < n:
            _prefetch(src, src_ids[i + _AHEAD] * w)  # never faults, even for an id out of range
        for j in range(w):
            dst[o, j] = src[r, j]
    return -1


@njit(cache=True, boundscheck=False, nogil=True)
def _gather_words(src, ids, dst):
    """``dst[i] = src[ids[i]]`` on 1-D arrays of words (ids, labels, CSC neighbours): the
    general loop's inner loop and flags cost more than the copy for one-word rows (0.13 ms
    vs 0.08 ms for 25k sampled neighbours). Returns as :func:`_copy_rows` does."""
    n, ns = len(ids), len(src)
    for i in range(n):
        r = ids[i]
        if r < 0 or r >= ns:
            return i
        if i + _AHEAD < n:
            _prefetch(src, ids[i + _AHEAD])  # never faults, even for an id out of range
        dst[i] = src[r]
    return -1


@njit(cache=True, inline="always")
def _range_of(x, starts, k):
    """The last of the ``k`` ranges ``[starts[m], starts[m + 1])`` whose start is <= x."""
    lo = 0
    if k <= 16:  # counted without branches: owners in random order mispredict them
        for m in range(1, k):
            lo += starts[m] <= x
        return lo
    hi = k - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if starts[mid] <= x:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, boundscheck=False, nogil=True)
def group_by_range(ids, starts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ids grouped by the range ``[starts[m], starts[m + 1])`` holding each (every id inside
    ``[starts[0], starts[-1])``, checked by the caller): ``(order, local, bounds)``, where
    ``order[bounds[m]:bounds[m + 1]]`` are the positions of range m's ids in ``ids``, in
    order, and ``local`` those ids less ``starts[m]``. Equal to a stable argsort of the
    owners (a counting sort: two passes, no sort); an empty range owns nothing."""
    n, k = len(ids), len(starts) - 1
    counts = np.zeros(k, np.int64)
    for i in range(n):
        counts[_range_of(ids[i], starts, k)] += 1
    bounds = np.zeros(k + 1, np.int64)
    for m in range(k):
        bounds[m + 1] = bounds[m] + counts[m]
    fill = bounds[:k].copy()
    order = np.empty(n, np.int64)
    local = np.empty(n, np.int64)
    for i in range(n):
        m = _range_of(ids[i], starts, k)
        p = fill[m]
        order[p] = i
        local[p] = ids[i] - starts[m]
        fill[m] = p + 1
    return order, local, bounds


@njit(cache=True, boundscheck=False, nogil=True)
def group_others_by_range(ids, starts, skip) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`group_by_range` of the ids outside range ``skip`` only (that range's ids are
    read in place: :func:`copy_rows_in_range`; their count is ``len(ids) - bounds[-1]``).
    One pass keeps the others, in order, without a branch (a pull's few remote ids among
    many local ones, in random order, would mispredict it); a second one groups them only
    when they fall in more than one range. For 110k ids, 15% of them others, on 2 ranges:
    0.29 ms, against 0.66 ms for the counting sort."""
    n, k = len(ids), len(starts) - 1
    order = np.empty(n, np.int64)
    local = np.empty(n, np.int64)
    own = np.empty(n, np.int32)
    p = 0
    for i in range(n):
        x = ids[i]
        m = _range_of(x, starts, k)
        order[p] = i
        local[p] = x - starts[m]
        own[p] = m
        p += m != skip
    counts = np.zeros(k, np.int64)
    for i in range(p):
        counts[own[i]] += 1
    bounds = np.zeros(k + 1, np.int64)
    owners = 0
    for m in range(k):
        bounds[m + 1] = bounds[m] + counts[m]
        owners += counts[m] > 0
    if owners <= 1:
        return order[:p], local[:p], bounds
    fill = bounds[:k].copy()
    grouped, grouped_local = np.empty(p, np.int64), np.empty(p, np.int64)
    for i in range(p):
        m = own[i]
        q = fill[m]
        grouped[q] = order[i]
        grouped_local[q] = local[i]
        fill[m] = q + 1
    return grouped, grouped_local, bounds


@njit(cache=True, boundscheck=False, nogil=True)
def _copy_rows_in_range(src, ids, lo, dst):
    """``dst[i] = src[ids[i] - lo]`` for every i whose id is in ``[lo, lo + len(src))`` (2-D
    arrays of row words); the other rows of ``dst`` are left as they are."""
    n, w, hi = len(ids), src.shape[1], lo + src.shape[0]
    for i in range(n):
        if i + _AHEAD < n:
            _prefetch(src, (ids[i + _AHEAD] - lo) * w)  # never faults, even out of range
        x = ids[i]
        if lo <= x < hi:
            r = x - lo
            for j in range(w):
                dst[i, j] = src[r, j]


@njit(cache=True, boundscheck=False, nogil=True)
def csr_by_dst(src, dst, num_dst) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(crow, col, order)``: edges ``(src, dst)`` as a CSR over the destinations
    ``0..num_dst-1`` (each destination's edges in their given order: a stable counting
    sort by destination, two passes; a destination out of range is a ValueError).
    ``col = src[order]``. On the epoch_floor blocks (30 batches, 144k + 14k edges each, from
    two machines' replies): 17 ms against 37 ms for bincount + numpy's stable argsort."""
    n = len(dst)
    crow = np.zeros(num_dst + 1, np.int64)
    for i in range(n):
        d = dst[i]
        if d < 0 or d >= num_dst:
            raise ValueError("an edge's destination is outside the block's destination nodes")
        crow[d + 1] += 1
    for v in range(num_dst):
        crow[v + 1] += crow[v]
    fill = crow[:num_dst].copy()
    order = np.empty(n, np.int64)
    col = np.empty(n, np.int64)
    for i in range(n):
        d = dst[i]
        p = fill[d]
        order[p] = i
        col[p] = src[i]
        fill[d] = p + 1
    return crow, col, order


def _row_words(a: np.ndarray) -> np.ndarray:
    """``a`` (C-contiguous) as a 2-D array of unsigned words, one row per row of ``a``."""
    word = np.dtype(f"u{np.gcd(a.dtype.itemsize, 8)}")
    row = int(np.prod(a.shape[1:], dtype=np.int64))  # not -1: ambiguous for 0 rows
    return a.reshape(len(a), row).view(word)


_NO_IDS = np.zeros(0, np.int64)


def copy_rows(src: np.ndarray, dst: np.ndarray, src_ids: np.ndarray | None = None,
              dst_ids: np.ndarray | None = None) -> np.ndarray:
    """``dst[dst_ids] = src[src_ids]`` (rows; either index may be None for "in order"), the
    compiled way when both arrays are C-contiguous of one dtype, numpy's way otherwise.
    Ids (taken as int64) must be inside their array: an IndexError names the first that is
    not (numpy's negative ids from the end are not supported).
    Returns ``dst``."""
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.dtype == dst.dtype
            and src.shape[1:] == dst.shape[1:] and src.dtype.itemsize and src.ndim):
        dst[slice(None) if dst_ids is None else dst_ids] = \
            src[slice(None) if src_ids is None else src_ids]
        return dst
    gather, scatter = src_ids is not None, dst_ids is not None
    s = np.ascontiguousarray(src_ids, np.int64) if gather else _NO_IDS
    d = np.ascontiguousarray(dst_ids, np.int64) if scatter else _NO_IDS
    n = len(s) if gather else len(d) if scatter else len(src)
    if n != (len(d) if scatter else len(dst) if gather else len(dst)):
        raise ValueError(f"copy_rows: {n} source rows for {len(d) if scatter else len(dst)} "
                         "destination rows")
    src_w, dst_w = _row_words(src), _row_words(dst)
    if gather and not scatter and src_w.shape[1] == 1:
        bad = _gather_words(src_w.reshape(-1), s, dst_w.reshape(-1))
    else:
        bad = _copy_rows(src_w, s, dst_w, d, gather, scatter)
    if bad >= 0:
        if gather and not 0 <= s[bad] < len(src):
            raise IndexError(f"row id {s[bad]} is outside the {len(src)} rows read from")
        raise IndexError(f"row id {d[bad] if scatter else bad} is outside the {len(dst)} rows "
                         "written to")
    return dst


def copy_rows_in_range(src: np.ndarray, dst: np.ndarray, ids: np.ndarray, lo: int) -> np.ndarray:
    """``dst[i] = src[ids[i] - lo]`` for the positions i whose id lies in ``[lo, lo +
    len(src))``, the other rows of ``dst`` untouched: a machine's own rows of a pull read in
    place, in one pass, without listing their positions (see :func:`group_by_range`).
    ``dst`` has a row per id. Returns ``dst``."""
    if len(dst) != len(ids):
        raise ValueError(f"copy_rows_in_range: {len(ids)} ids for {len(dst)} destination rows")
    ids = np.ascontiguousarray(ids, np.int64)
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.dtype == dst.dtype
            and src.shape[1:] == dst.shape[1:] and src.dtype.itemsize and src.ndim):
        mine = (ids >= lo) & (ids < lo + len(src))
        dst[mine] = src[ids[mine] - lo]
        return dst
    _copy_rows_in_range(_row_words(src), ids, lo, _row_words(dst))
    return dst


def gather_rows(src: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``src[ids]`` for int64 row ids (see :func:`copy_rows`), into a new array."""
    return copy_rows(src, np.empty((len(ids), *src.shape[1:]), src.dtype), src_ids=ids)


@contextlib.contextmanager
def _without_blas_probe() -> Iterator[None]:
    """Numba's first dispatch in a process loads its CPU target's registries, and one of them
    probes for scipy's BLAS by importing ``scipy.linalg.cython_blas``, which imports all of
    ``scipy.linalg`` (0.4-0.5 s of each trainer's and server's start-up here). None of these
    kernels calls BLAS; the probe only decides whether ``np.convolve``/``np.correlate`` in
    numba code take BLAS or a plain loop (both correct). So the probe finds nothing while the
    registries load, and ``scipy.linalg`` imports as usual afterwards (numba's ``np.dot``
    looks for BLAS again when it compiles). Where ``scipy.linalg`` is loaded already, the
    probe is free and runs as usual."""
    name = "scipy.linalg.cython_blas"
    if "scipy.linalg" in sys.modules or name in sys.modules:
        yield
        return
    sys.modules[name] = None  # type: ignore[assignment]  # import raises ModuleNotFoundError
    try:
        yield
    finally:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def warm_up() -> None:
    """Load (or compile, the first time on a machine) every kernel now, at process start-up,
    rather than inside the first training step: loading them from numba's cache takes about
    0.3 s, compiling about 2 s."""
    with _without_blas_probe():  # the first dispatch loads numba's registries
        sample_uniform(np.zeros(1, np.int64), np.ones(1, np.int64), np.zeros(1, np.uint64), 1)
    group_by_range(np.zeros(1, np.int64), np.array([0, 1], np.int64))
    group_others_by_range(np.zeros(1, np.int64), np.array([0, 1], np.int64), 0)
    csr_by_dst(np.zeros(1, np.int64), np.zeros(1, np.int64), 1)
    for mark in (np.zeros(1, np.int32), np.zeros(1, np.int64)):  # see sampling.block._IdMap
        relabel_first_seen(mark, np.zeros(1, np.int64), mark.dtype.type(-1))
    for dtype in (np.uint8, np.uint32, np.uint64):  # bool masks, float32 features, int64 ids
        one, ids = np.zeros((1, 1), dtype), np.zeros(1, np.int64)
        received = np.frombuffer(one.tobytes(), dtype).reshape(1, 1)  # read-only, as off the wire
        for src in (one, received):
            for gather, scatter in ((True, False), (False, True), (True, True)):
                _copy_rows(src, ids, one, ids, gather, scatter)
            _gather_words(src.reshape(-1), ids, one.reshape(-1))
            _copy_rows_in_range(src, ids, 0, one)
