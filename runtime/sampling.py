"""Neighbour sampling kernels on a CSC (in-edges grouped by destination), vectorised in numpy.

Sampling without replacement uses Floyd's algorithm run for all seeds at once: the only Python
loop is over the fanout (tens of steps), never over nodes or edges.
"""

from __future__ import annotations

import numpy as np


def sample_etype(
    indptr: np.ndarray,
    seeds: np.ndarray,
    fanout: int,
    replace: bool,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample up to ``fanout`` in-edges of each seed (local destination index into ``indptr``).

    Returns ``(seed_idx, pos)``: for every sampled edge, the index of its seed in ``seeds`` and
    its position in the CSC (so ``indices[pos]`` is the source and ``pos`` the local edge id).
    ``fanout < 0`` takes every in-edge. Without replacement a seed with fewer in-edges than the
    fanout keeps all of them; with replacement every seed with in-edges gets exactly ``fanout``.
    """
    seeds = np.asarray(seeds, dtype=np.int64)
    start = np.asarray(indptr[seeds], dtype=np.int64)
    deg = np.asarray(indptr[seeds + 1], dtype=np.int64) - start
    if fanout < 0:
        return _all_edges(start, deg)
    if replace:
        has = np.flatnonzero(deg > 0)
        off = (rng.random((len(has), fanout)) * deg[has, None]).astype(np.int64)
        seed_idx = np.repeat(has, fanout)
        return seed_idx, (start[has, None] + off).reshape(-1)
    small = deg <= fanout
    idx_small = np.flatnonzero(small)
    seed_small, pos_small = _all_edges(start[idx_small], deg[idx_small])
    seed_small = idx_small[seed_small]
    big = np.flatnonzero(~small)
    if len(big) == 0:
        return seed_small, pos_small
    n = deg[big]
    chosen = np.empty((len(big), fanout), np.int64)
    # Floyd: for j = n-k .. n-1 draw t in [0, j]; keep t unless already chosen, else take j.
    for c in range(fanout):
        j = n - fanout + c
        t = (rng.random(len(big)) * (j + 1)).astype(np.int64)
        dup = (chosen[:, :c] == t[:, None]).any(axis=1) if c else np.zeros(len(big), bool)
        chosen[:, c] = np.where(dup, j, t)
    pos_big = (start[big, None] + chosen).reshape(-1)
    seed_big = np.repeat(big, fanout)
    seed_idx = np.concatenate([seed_small, seed_big])
    pos = np.concatenate([pos_small, pos_big])
    order = np.argsort(seed_idx, kind="stable")
    return seed_idx[order], pos[order]


def _all_edges(start: np.ndarray, deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = int(deg.sum())
    seed_idx = np.repeat(np.arange(len(deg)), deg)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg)
    return seed_idx, np.repeat(start, deg) + offset
