"""Balanced random partitioning: the baseline every real method must beat on edge cut."""

from __future__ import annotations

import numpy as np

from ..errors import PartitionOptionError


def assign(num_nodes: int, num_parts: int, *, seed: int = 0) -> np.ndarray:
    """Assign nodes to parts at random, with part sizes differing by at most one.

    Node ``perm[i]`` of a seeded random permutation goes to part ``i % num_parts``.

    Returns:
        int64 array of length ``num_nodes`` with the part id of each node.
    """
    num_nodes = int(num_nodes)
    num_parts = int(num_parts)
    if num_nodes < 0:
        raise PartitionOptionError(f"num_nodes must be >= 0, got {num_nodes}")
    if num_parts < 1:
        raise PartitionOptionError(f"num_parts must be >= 1, got {num_parts}")
    perm = np.random.default_rng(seed).permutation(num_nodes)
    parts = np.empty(num_nodes, dtype=np.int64)
    parts[perm] = np.arange(num_nodes, dtype=np.int64) % num_parts
    return parts
