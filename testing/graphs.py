"""The small graphs the tests build in-process (kept tiny: the CI machine has 2 cores)."""

from __future__ import annotations

import numpy as np

from partitioner.graph import Graph


def community_graph(n: int = 600, k: int = 4, deg: int = 8, seed: int = 0) -> Graph:
    """A homogeneous graph of ``k`` planted communities, both edge directions, with node data."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, k, n)
    m = n * deg // 2
    src = rng.integers(0, n, m)
    # 90% of edges stay inside the source's community.
    members = [np.flatnonzero(comm == c) for c in range(k)]
    dst = rng.integers(0, n, m)
    intra = rng.random(m) < 0.9
    for c in range(k):
        sel = intra & (comm[src] == c)
        dst[sel] = rng.choice(members[c], int(sel.sum()))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    s, d = np.concatenate([src, dst]), np.concatenate([dst, src])
    ndata = {
        "feat": rng.standard_normal((n, 5)).astype(np.float32),
        "label": comm.astype(np.int64),
        "train_mask": rng.random(n) < 0.3,
    }
    edata = {"w": rng.random(len(s)).astype(np.float32)}
    return Graph.homogeneous(s, d, n, ndata=ndata, edata=edata)


def hetero_graph(seed: int = 0) -> Graph:
    """Two node types, three edge types (one of them between different types), with data."""
    rng = np.random.default_rng(seed)
    n_p, n_a = 300, 120
    cites = (rng.integers(0, n_p, 1500), rng.integers(0, n_p, 1500))
    ws, wd = rng.integers(0, n_a, 800), rng.integers(0, n_p, 800)
    return Graph(
        num_nodes={"paper": n_p, "author": n_a},
        edges={
            ("paper", "cites", "paper"): cites,
            ("author", "writes", "paper"): (ws, wd),
            ("paper", "written-by", "author"): (wd.copy(), ws.copy()),
        },
        ndata={
            "paper": {"feat": rng.standard_normal((n_p, 4)).astype(np.float32),
                      "train_mask": rng.random(n_p) < 0.5},
            "author": {"feat": rng.standard_normal((n_a, 3)).astype(np.float32)},
        },
        edata={("author", "writes", "paper"): {"year": rng.integers(1990, 2024, 800)}},
    )
