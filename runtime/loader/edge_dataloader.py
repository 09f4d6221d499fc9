"""``DistEdgeDataLoader``: mini-batches of edges with uniform negative sampling (link prediction).

Each batch yields ``(input_nodes, pos_graph, neg_graph, blocks)`` as DGL does: the positive
and negative pair graphs hold edges between the batch's seed nodes (local indices into
``blocks[-1].dstdata[NID]``), and the blocks are sampled for those seed nodes. With
``exclude="self"`` the batch's own edges are not sampled as neighbours (no label leakage).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import DistError
from ..sampling.block import NID, PairGraph
from ..sampling.neighbor import current_batch_key
from .dataloader import DistDataLoader


class UniformNegative:
    """``k`` negative edges per positive edge: same source, destination uniform over nodes."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k

    def __call__(self, src: np.ndarray, num_nodes: int, rng: np.random.Generator):
        return np.repeat(src, self.k), rng.integers(0, num_nodes, len(src) * self.k)


class DistEdgeDataLoader(DistDataLoader):
    """DGL's ``DistEdgeDataLoader(g, eids, graph_sampler, negative_sampler=..., batch_size)``.

    Homogeneous graphs (one edge type). ``negative_sampler`` is a ``UniformNegative(k)`` or an
    int ``k``.
    """

    def __init__(self, g: Any, eids: Any, graph_sampler: Any, batch_size: int,
                 negative_sampler: Any = 1, exclude: str | None = "self",
                 shuffle: bool = False, drop_last: bool = False, seed: int = 0,
                 **kwargs: Any) -> None:
        if len(g.canonical_etypes) != 1:
            raise DistError("DistEdgeDataLoader supports one edge type for now")
        self.g = g
        self.graph_sampler = graph_sampler
        self.negative = (negative_sampler if callable(negative_sampler)
                         else UniformNegative(int(negative_sampler)))
        if exclude not in (None, "self"):
            raise DistError(f"exclude={exclude!r}: supported are None and 'self'")
        self.exclude = exclude
        # A separate object, not a bound method of the loader: that would be a reference
        # cycle, and a loader in a cycle (with its sampler processes) lives until the cyclic
        # collector runs.
        super().__init__(eids, batch_size, shuffle=shuffle,
                         collate_fn=_EdgeBatches(g, graph_sampler, self.negative, exclude, seed),
                         drop_last=drop_last, seed=seed, **kwargs)


class _EdgeBatches:
    """The collate function of :class:`DistEdgeDataLoader`: a batch of edge ids into
    ``(input_nodes, pos_graph, neg_graph, blocks)``."""

    def __init__(self, g: Any, graph_sampler: Any, negative: Any, exclude: str | None,
                 seed: int) -> None:
        self.g, self.graph_sampler, self.negative = g, graph_sampler, negative
        self.exclude, self.seed = exclude, seed
        self.calls = 0

    def __call__(self, eids: torch.Tensor):
        self.calls += 1
        key = current_batch_key() or (0, self.calls)
        rng = np.random.default_rng([self.seed, key[0], key[1]])
        src, dst = (t.numpy() for t in self.g.find_edges(eids))
        neg_src, neg_dst = self.negative(src, self.g.num_nodes(), rng)
        all_ids = np.concatenate([src, dst, neg_src, neg_dst])
        seeds, local = np.unique(all_ids, return_inverse=True)
        n = len(src)
        pos = PairGraph(torch.from_numpy(local[:n]), torch.from_numpy(local[n:2 * n]),
                        torch.from_numpy(seeds), eids)
        m = len(neg_src)
        neg = PairGraph(torch.from_numpy(local[2 * n:2 * n + m]),
                        torch.from_numpy(local[2 * n + m:]), torch.from_numpy(seeds))
        exclude = eids if self.exclude == "self" else None
        blocks = self.graph_sampler.sample_blocks(torch.from_numpy(seeds), self.g,
                                                  exclude_edges=exclude)
        return blocks[0].srcdata[NID], pos, neg, blocks
