"""Compiled (numba) kernels for the sampling hot path, bit for bit equal to the numpy code.

Sampling without replacement draws, for every high-degree seed, ``fanout`` distinct offsets
with Floyd's algorithm; in numpy that is a loop over the fanout with an O(fanout) duplicate
check per draw on every seed at once, plus temporaries of (seeds x fanout). Compiled, it is
one pass over the seeds. Relabeling a block's node ids in order of first appearance is a
plain sequential loop compiled, where numpy needs ``minimum.at`` (slow) and several passes.

The draws use the same keyed randomness as :mod:`runtime.sampling` (splitmix64 of the seed's
key and the draw number), so the kernels return exactly what the numpy code returns (tested
on random inputs); ``runtime.sampling`` keeps the numpy code as the reference.
``cache=True`` keeps the compiled code on disk, so only the first process compiles.
"""

from __future__ import annotations

import numpy as np
from numba import njit

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


@njit(cache=True)
def sample_uniform(start, deg, keys, fanout):
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


@njit(cache=True)
def relabel_first_seen(mark, ids, empty):
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


def warm_up() -> None:
    """Load (or compile, the first time on a machine) every kernel now, at process start-up,
    rather than inside the first training step: loading them from numba's cache takes about
    0.3 s, compiling about 2 s."""
    sample_uniform(np.zeros(1, np.int64), np.ones(1, np.int64), np.zeros(1, np.uint64), 1)
    relabel_first_seen(np.zeros(1, np.int64), np.zeros(1, np.int64), np.int64(-1))
