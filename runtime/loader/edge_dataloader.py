"""``DistEdgeDataLoader``: mini-batches of edges for edge prediction and link prediction.

As DGL's: each batch yields ``(input_nodes, pair_graph, blocks)``, or, with a
``negative_sampler``, ``(input_nodes, pos_graph, neg_graph, blocks)``. The pair graphs hold the
batch's edges (and its negative edges) between the batch's seed nodes: node ``i`` of type ``t``
is ``pair_graph.nodes[t].data[NID][i]``, which is also the ``i``-th destination node of the
last block, so ``pair_graph.ndata["h"] = blocks_output`` lines up. ``exclude`` keeps the
batch's edges (``"self"``), also their reverse edges (``"reverse_id"`` with ``reverse_eids``,
``"reverse_types"`` with ``reverse_etypes``) out of the sampled neighbourhoods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..errors import DistError
from ..sampling.block import NID
from ..sampling.graph import PairGraph
from ..sampling.neighbor import current_batch_key
from .dataloader import DistDataLoader, split_by_type
from .negative_sampler import Uniform, canonical_etype

UniformNegative = Uniform  # the library's earlier name

EXCLUDE_MODES = (None, "self", "reverse_id", "reverse_types")


class DistEdgeDataLoader(DistDataLoader):
    """DGL's ``DistEdgeDataLoader(g, eids, graph_sampler, negative_sampler=None, exclude=None,
    reverse_eids=None, reverse_etypes=None, batch_size=..., shuffle=..., drop_last=...)``.

    ``eids`` are the graph's edge ids, ``{etype: ids}`` on a graph of several edge types (the
    batches then mix the types, as DGL's). ``negative_sampler`` is a callable ``(g, eids) ->
    (src, dst)`` such as ``negative_sampler.Uniform(k)``, or an int ``k`` for ``Uniform(k)``.
    Other keyword arguments go to :class:`DistDataLoader` (``num_workers``, ``seed``, ...).
    """

    def __init__(self, g: Any, eids: Any, graph_sampler: Any, batch_size: int,
                 negative_sampler: Any = None, exclude: str | None = None,
                 reverse_eids: Any = None, reverse_etypes: Any = None,
                 shuffle: bool = False, drop_last: bool = False, seed: int = 0,
                 **kwargs: Any) -> None:
        self.g = g
        self.graph_sampler = graph_sampler
        if isinstance(negative_sampler, int) and not isinstance(negative_sampler, bool):
            negative_sampler = Uniform(negative_sampler)
        self.negative = negative_sampler
        if exclude not in EXCLUDE_MODES:
            raise DistError(f"exclude={exclude!r}: supported are {EXCLUDE_MODES}")
        if exclude == "reverse_id" and reverse_eids is None:
            raise DistError("exclude='reverse_id' needs reverse_eids= (edge id -> its reverse)")
        if exclude == "reverse_types" and reverse_etypes is None:
            raise DistError("exclude='reverse_types' needs reverse_etypes= (etype -> reverse)")
        self.exclude = exclude
        typed = isinstance(eids, Mapping)
        if typed:
            book = g.get_partition_book()
            eids = np.concatenate([np.empty(0, np.int64)] + [
                np.asarray(book.map_to_homo_eid(_ids(v), canonical_etype(g, et)), np.int64)
                for et, v in eids.items()])
        elif len(g.canonical_etypes) != 1:
            raise DistError(f"eids must be a dict keyed by edge type for edge types "
                            f"{g.canonical_etypes}")
        # A separate object, not a bound method of the loader: that would be a reference
        # cycle, and a loader in a cycle (with its sampler processes) lives until the cyclic
        # collector runs.
        collate = _EdgeBatches(g, graph_sampler, self.negative, exclude, seed, typed,
                               reverse_eids, reverse_etypes)
        super().__init__(eids, batch_size, shuffle=shuffle, collate_fn=collate,
                         drop_last=drop_last, seed=seed, **kwargs)


def _ids(x: Any) -> np.ndarray:
    return np.asarray(torch.as_tensor(x).numpy(), np.int64).reshape(-1)


class _EdgeBatches:
    """The collate function of :class:`DistEdgeDataLoader`: a batch of edge ids (homogeneous
    ids when ``typed``) into ``(input_nodes, pair_graph[, neg_graph], blocks)``."""

    def __init__(self, g: Any, graph_sampler: Any, negative: Any, exclude: str | None,
                 seed: int, typed: bool, reverse_eids: Any, reverse_etypes: Any) -> None:
        self.g, self.graph_sampler, self.negative = g, graph_sampler, negative
        self.exclude, self.seed, self.typed = exclude, seed, typed
        self.reverse_eids, self.reverse_etypes = reverse_eids, reverse_etypes
        self.calls = 0

    def __call__(self, items: torch.Tensor):
        self.calls += 1
        key = current_batch_key() or (0, self.calls)
        rng = np.random.default_rng([self.seed, key[0], key[1]])
        g = self.g
        eids = (split_by_type(g, items.numpy(), "edge") if self.typed
                else {g.canonical_etypes[0]: items})
        pos = {et: tuple(_ids(t) for t in g.find_edges(v, etype=et)) for et, v in eids.items()}
        neg = None
        if self.negative is not None:
            arg = eids if self.typed else eids[g.canonical_etypes[0]]
            out = (self.negative(g, arg, rng=rng) if isinstance(self.negative, Uniform)
                   else self.negative(g, arg))
            if not isinstance(out, Mapping):
                out = {g.canonical_etypes[0]: out}
            neg = {canonical_etype(g, et): (_ids(s), _ids(d)) for et, (s, d) in out.items()}
        seeds, pos_graph, neg_graph = _compact(g, pos, neg, eids)
        exclude = self._excluded(eids)
        seed_arg = seeds if len(g.ntypes) > 1 else seeds[g.ntypes[0]]
        blocks = self.graph_sampler.sample_blocks(seed_arg, g, exclude_edges=exclude)
        input_nodes = blocks[0].srcdata[NID]
        if neg_graph is None:
            return input_nodes, pos_graph, blocks
        return input_nodes, pos_graph, neg_graph, blocks

    def _excluded(self, eids: dict) -> Any:
        """DGL's ``_find_exclude_eids``: the edges the blocks must not sample."""
        if self.exclude is None:
            return None
        out = {et: _ids(v) for et, v in eids.items()}
        if self.exclude == "reverse_id":
            rev = self.reverse_eids
            for et, v in list(out.items()):
                table = rev[_key_in(rev, et)] if isinstance(rev, Mapping) else rev
                out[et] = np.concatenate([v, _ids(torch.as_tensor(table)[torch.from_numpy(v)])])
        elif self.exclude == "reverse_types":
            rev = {canonical_etype(self.g, k): canonical_etype(self.g, v)
                   for k, v in self.reverse_etypes.items()}
            for et, v in list(out.items()):
                if et in rev:
                    r = rev[et]
                    out[r] = np.concatenate([out.get(r, np.empty(0, np.int64)), v])
        if len(self.g.canonical_etypes) == 1:
            return torch.from_numpy(out[self.g.canonical_etypes[0]])
        return {et: torch.from_numpy(v) for et, v in out.items()}


def _key_in(mapping: Mapping, et: tuple[str, str, str]) -> Any:
    for k in (et, et[1], ":".join(et)):
        if k in mapping:
            return k
    raise KeyError(f"reverse_eids has no entry for edge type {et}")


def _compact(g: Any, pos: dict, neg: dict | None, eids: dict):
    """DGL's ``compact_graphs([pos, neg])``: the seed nodes of every type (the ends of the
    positive and negative edges, ascending) and both pair graphs in local indices."""
    ends: dict[str, list[np.ndarray]] = {t: [] for t in g.ntypes}
    for edges in (pos, neg or {}):
        for et, (s, d) in edges.items():
            ends[et[0]].append(s)
            ends[et[2]].append(d)
    seeds = {t: np.unique(np.concatenate(v)) if v else np.empty(0, np.int64)
             for t, v in ends.items()}
    empty = (torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64))

    def local(edges: dict) -> dict:
        out = {}
        for et in g.canonical_etypes:
            if et in edges:
                s, d = edges[et]
                out[et] = (torch.from_numpy(np.searchsorted(seeds[et[0]], s)),
                           torch.from_numpy(np.searchsorted(seeds[et[2]], d)))
            else:
                out[et] = empty
        return out

    seed_t = {t: torch.from_numpy(v) for t, v in seeds.items()}
    pos_eids = {et: torch.as_tensor(eids[et], dtype=torch.int64) if et in eids
                else torch.empty(0, dtype=torch.int64) for et in g.canonical_etypes}
    pos_graph = PairGraph.typed(seed_t, local(pos), pos_eids)
    neg_graph = None if neg is None else PairGraph.typed(seed_t, local(neg))
    return seed_t, pos_graph, neg_graph
