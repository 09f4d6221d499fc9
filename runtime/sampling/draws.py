"""Neighbour sampling kernels on a CSC (in-edges grouped by destination) or an out-CSR
(out-edges grouped by source), vectorised in numpy.

Randomness is *keyed*: the draws for a seed node come from a hash of (sampling seed, node id,
draw index), not from a shared random stream. The same seed node therefore gets the same
neighbours whichever machine, server or process samples it, so standalone and distributed runs
with the same seed give the same mini-batches. Sampling without replacement uses Floyd's
algorithm for all seeds at once: the only Python loop is over the fanout, never over nodes.
"""

from __future__ import annotations

import numpy as np

from . import kernels

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)

# Added to the edge type's salt when sampling out-edges: a seed's in- and out-draws differ.
OUT_SALT = 1 << 20


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, elementwise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def node_keys(seed: int, ids: np.ndarray, salt: int = 0) -> np.ndarray:
    """One 64-bit key per node id for sampling call ``seed`` (``salt`` separates edge types)."""
    with np.errstate(over="ignore"):
        mixed = (int(seed) * 2654435761 + int(salt) * 97 + 1) % (1 << 64)
        base = _mix(np.asarray([mixed], dtype=np.uint64))[0]
        return _mix(np.asarray(ids, dtype=np.int64).astype(np.uint64) * _GOLDEN + base)


def uniform(keys: np.ndarray, draw: int | np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1), one per key, for draw number ``draw``."""
    with np.errstate(over="ignore"):
        x = _mix(keys + np.asarray(draw, dtype=np.uint64) * _GOLDEN)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def sample_etype(
    indptr: np.ndarray,
    seeds: np.ndarray,
    keys: np.ndarray,
    fanout: int,
    replace: bool = False,
    weights: np.ndarray | None = None,
    excluded: np.ndarray | None = None,
    edge_ids: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample up to ``fanout`` in-edges of each seed (local destination index into ``indptr``).

    The same on an out-CSR samples out-edges (seeds index its rows, the sources).

    Args:
        keys: one random key per seed (see :func:`node_keys`).
        weights: optional weight of every CSC position (edge probability up to a constant).
        excluded: optional sorted CSC positions that must not be sampled, or sorted edge ids
            when ``edge_ids`` is given.
        edge_ids: optional edge id of every position (an out-CSR's ``eids``), which
            ``excluded`` then refers to.

    Returns ``(seed_idx, pos)``: for every sampled edge the index of its seed in ``seeds`` and
    its CSC position (``indices[pos]`` is the source, ``pos`` the local edge id), grouped by
    seed. ``fanout < 0`` takes every in-edge. Without replacement a seed with at most
    ``fanout`` in-edges keeps all of them; with replacement each seed with in-edges gets
    exactly ``fanout`` draws.
    """
    seeds = np.asarray(seeds, dtype=np.int64)
    # Random reads (CSC rows here, neighbours and edge ids in sample_on_part) go through the
    # compiled gather, which asks for the next reads while it copies.
    start = np.asarray(kernels.gather_rows(indptr, seeds), dtype=np.int64)
    deg = np.asarray(kernels.gather_rows(indptr, seeds + 1), dtype=np.int64) - start
    if weights is not None or excluded is not None:
        return _sample_weighted(start, deg, keys, fanout, replace, weights, excluded, edge_ids)
    if fanout < 0:
        return _all_edges(start, deg)
    if replace:
        has = np.flatnonzero(deg > 0)
        draws = uniform(keys[has, None], np.arange(fanout)[None, :])
        off = (draws * deg[has, None]).astype(np.int64)
        return np.repeat(has, fanout), (start[has, None] + off).reshape(-1)
    return kernels.sample_uniform(start, deg, keys, int(fanout))


def sample_uniform_numpy(
    start: np.ndarray, deg: np.ndarray, keys: np.ndarray, fanout: int
) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference of ``kernels.sample_uniform`` (Floyd's draws for all seeds at once;
    the only Python loop is over the fanout). Kept to test the compiled kernel against."""
    big = np.flatnonzero(deg > fanout)
    if len(big) == 0:
        return _all_edges(start, deg)
    n = deg[big]
    k = keys[big]
    chosen = np.empty((len(big), fanout), np.int64)
    # Floyd: for j = n-k .. n-1 draw t in [0, j]; keep t unless already chosen, else take j.
    for c in range(fanout):
        j = n - fanout + c
        t = (uniform(k, c) * (j + 1)).astype(np.int64)
        dup = (chosen[:, :c] == t[:, None]).any(axis=1) if c else np.zeros(len(big), bool)
        chosen[:, c] = np.where(dup, j, t)
    chosen.sort(axis=1)
    # Every seed keeps min(deg, fanout) edges: take all edges of every seed, then overwrite
    # the slots of the high-degree seeds with their chosen offsets (output grouped by seed).
    take = np.minimum(deg, fanout)
    seed_idx, offset = _all_edges(np.zeros(len(deg), np.int64), take)
    first = np.cumsum(take) - take
    slots = (first[big, None] + np.arange(fanout)).reshape(-1)
    offset[slots] = chosen.reshape(-1)
    return seed_idx, start[seed_idx] + offset


def _all_edges(start: np.ndarray, deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = int(deg.sum())
    seed_idx = np.repeat(np.arange(len(deg)), deg)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg)
    return seed_idx, np.repeat(start, deg) + offset


def _sample_weighted(start, deg, keys, fanout, replace, weights, excluded, edge_ids=None):
    """Sampling over every candidate edge: weighted (Efraimidis-Spirakis keys) and/or excluding."""
    seed_idx, pos = _all_edges(start, deg)
    w = np.ones(len(pos)) if weights is None else np.asarray(weights[pos], dtype=np.float64)
    if excluded is not None and len(excluded):
        ids = pos if edge_ids is None else np.asarray(edge_ids[pos], dtype=np.int64)
        hit = np.searchsorted(excluded, ids)
        hit = np.minimum(hit, len(excluded) - 1)
        w = np.where(excluded[hit] == ids, 0.0, w)
    ok = w > 0
    seed_idx, pos, w = seed_idx[ok], pos[ok], w[ok]
    if fanout < 0 or len(pos) == 0:
        return seed_idx, pos
    offset = pos - start[seed_idx]
    u = uniform(keys[seed_idx], offset)
    if replace:
        # Inverse-CDF draws per seed over its candidates' cumulative weights.
        cum = np.cumsum(w)
        first = np.searchsorted(seed_idx, np.arange(len(deg)))
        last = np.searchsorted(seed_idx, np.arange(len(deg)), side="right")
        has = np.flatnonzero(last > first)
        lo = np.where(first[has] > 0, cum[first[has] - 1], 0.0)
        hi = cum[last[has] - 1]
        draws = uniform(keys[has, None], np.arange(fanout)[None, :] + (1 << 20))
        target = lo[:, None] + draws * (hi - lo)[:, None]
        picked = np.searchsorted(cum, target.reshape(-1), side="right")
        picked = np.minimum(picked, np.repeat(last[has] - 1, fanout))
        return np.repeat(has, fanout), pos[picked]
    # Keep the `fanout` largest u**(1/w) per seed: sort by (seed, -key) and take the heads.
    score = np.log(np.maximum(u, 1e-300)) / w
    order = np.lexsort((-score, seed_idx))
    seed_sorted = seed_idx[order]
    group_start = np.searchsorted(seed_sorted, seed_sorted)
    rank = np.arange(len(order)) - group_start
    keep = order[rank < fanout]
    keep.sort()
    return seed_idx[keep], pos[keep]


def sample_on_part(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds_local: np.ndarray,
    key_ids: np.ndarray,
    salt: int,
    fanout: int,
    replace: bool,
    seed: int,
    weights: np.ndarray | None = None,
    excluded: np.ndarray | None = None,
    eids: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Sample one part's CSC: returns [seed index, homogeneous source id, CSC position].

    With ``eids`` (an out-CSR: rows are sources, ``indices`` destinations) it returns
    [seed index, homogeneous destination id, homogeneous edge id] and ``excluded`` holds
    sorted homogeneous edge ids. ``key_ids`` are the seeds' *input* (original) ids: draws
    are keyed by them, so any process and any partitioning of the same graph samples the
    same edges for the same seed.
    """
    keys = node_keys(seed, key_ids, salt)
    seed_idx, pos = sample_etype(indptr, seeds_local, keys, fanout, replace, weights, excluded,
                                 eids)
    ids = pos if eids is None else np.asarray(kernels.gather_rows(eids, pos), dtype=np.int64)
    return [seed_idx, np.asarray(kernels.gather_rows(indices, pos), dtype=np.int64), ids]
