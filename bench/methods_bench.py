"""Benchmark symmetric_csr and the partitioning methods on a generated community graph.

    python -m bench.methods_bench [--nodes N] [--methods metis1,metis3,kaminpar,random]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from partitioner.methods import assign_parts
from partitioner.methods import kaminpar as kaminpar_method
from partitioner.symmetric import symmetric_csr


def community_graph(
    num_nodes: int, degree: int, communities: int, p_in: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random graph with planted communities, every edge given in both directions.

    Returns ``(src, dst, community)`` with ``num_nodes * degree`` directed edges: each of the
    ``num_nodes * degree / 2`` undirected edges starts at a uniform node and ends, with
    probability ``p_in``, at a uniform node of the same community, else anywhere.
    """
    rng = np.random.default_rng(seed)
    community = rng.integers(0, communities, num_nodes)
    members = np.argsort(community, kind="stable")
    sizes = np.bincount(community, minlength=communities)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    m = num_nodes * degree // 2
    u = rng.integers(0, num_nodes, m)
    cu = community[u]
    inside = members[starts[cu] + (rng.random(m) * sizes[cu]).astype(np.int64)]
    del cu
    v = np.where(rng.random(m) < p_in, inside, rng.integers(0, num_nodes, m))
    del inside
    return np.concatenate([u, v]), np.concatenate([v, u]), community


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; False where Linux refuses."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


_highest = 0.0


def peak_gb() -> float:
    """Peak RSS in GB since the last reset_peak (or process start)."""
    global _highest
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    # reset_peak also resets ru_maxrss, so the whole run's peak is kept here.
    _highest = max(_highest, peak)
    return peak


def scipy_baseline(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The straightforward symmetric CSR: scipy COO->CSR with duplicate summing."""
    import scipy.sparse as sp

    keep = src != dst
    s = src[keep].astype(np.int32)
    d = dst[keep].astype(np.int32)
    rows, cols = np.concatenate([s, d]), np.concatenate([d, s])
    del s, d, keep
    csr = sp.coo_array((np.ones(rows.size, np.int8), (rows, cols)), shape=(n, n)).tocsr()
    return csr.indptr, csr.indices


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=int, default=20, help="directed edges per node")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--communities", type=int, default=64)
    ap.add_argument("--p-in", type=float, default=0.9, help="share of intra-community edges")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="KaMinPar threads (default all)")
    ap.add_argument(
        "--methods", default="metis1,metis3,kaminpar,random",
        help="comma list of metis1, metis3, kaminpar, random",
    )
    ap.add_argument("--scipy-baseline", action="store_true", help="also time scipy COO->CSR")
    args = ap.parse_args()

    t = time.perf_counter()
    src, dst, community = community_graph(
        args.nodes, args.degree, args.communities, args.p_in, args.seed
    )
    n = args.nodes
    print(f"graph: {n:,} nodes, {src.size:,} directed edges, {args.communities} communities, "
          f"generated in {time.perf_counter() - t:.2f} s, RSS peak {peak_gb():.2f} GB")

    if args.scipy_baseline:
        reset_peak()
        t = time.perf_counter()
        base = scipy_baseline(src, dst, n)
        print(f"scipy baseline:   {time.perf_counter() - t:6.2f} s  peak {peak_gb():.2f} GB  "
              f"nnz {int(base[0][-1]):,}")
        del base

    reset_peak()
    t = time.perf_counter()
    indptr, indices = symmetric_csr(src, dst, n)
    print(f"symmetric_csr:    {time.perf_counter() - t:6.2f} s  peak {peak_gb():.2f} GB  "
          f"nnz {indices.size:,}")

    # Balance constraints as the pipeline builds them: unit, a 0/1 train mask that favours
    # some communities (so balancing it is not free), in-degree.
    rng = np.random.default_rng(args.seed + 1)
    train = (rng.random(n) < np.where(community % 4 == 0, 0.5, 0.05)).astype(np.int32)
    in_degree = np.bincount(dst, minlength=n).astype(np.int32)
    del src, dst
    weights3 = np.ascontiguousarray(np.stack([np.ones(n, np.int32), train, in_degree], axis=1))
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    undirected = indices.size // 2

    def report(name: str, seconds: float, parts: np.ndarray) -> None:
        cut = int(np.count_nonzero(parts[rows] != parts[indices])) // 2
        per = [np.bincount(parts, weights=weights3[:, c], minlength=args.parts) for c in range(3)]
        imb = " ".join(f"{p.max() / p.mean():.3f}" for p in per)
        print(f"{name:<17} {seconds:6.2f} s  peak {peak_gb():.2f} GB  cut {cut:,} "
              f"({cut / undirected:.1%})  max/mean unit,train,in-deg {imb}")

    runs = {
        "metis1": lambda: assign_parts("metis", indptr, indices, args.parts, seed=args.seed),
        "metis3": lambda: assign_parts(
            "metis", indptr, indices, args.parts, vweights=weights3, seed=args.seed
        ),
        "kaminpar": lambda: kaminpar_method.assign(
            indptr, indices, args.parts, seed=args.seed, threads=args.threads
        ),
        "random": lambda: assign_parts("random", indptr, indices, args.parts, seed=args.seed),
    }
    labels = {"metis1": "METIS 1 constr:", "metis3": "METIS 3 constr:",
              "kaminpar": "KaMinPar:", "random": "random:"}
    for name in args.methods.split(","):
        reset_peak()
        t = time.perf_counter()
        parts = runs[name]()
        report(labels[name], time.perf_counter() - t, parts)
        del parts
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"process peak RSS {max(_highest, peak_gb()):.2f} GB, "
          f"CPU {usage.ru_utime + usage.ru_stime:.1f} s, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
