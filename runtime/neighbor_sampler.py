"""Distributed neighbour sampling: ``sample_neighbors`` and DGL's ``NeighborSampler``.

Seeds are grouped by the machine that owns them; the local machine samples from shared memory,
every other machine gets one request carrying all edge types, sent together. Results are
per-type ids, so they index features directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .block import Block, to_block
from .client import Request
from .dist_graph import DistGraph
from .errors import DistError
from .sampling import sample_on_part

CanonicalEtype = tuple[str, str, str]


def _as_seed_dict(g: DistGraph, nodes: Any) -> dict[str, np.ndarray]:
    if isinstance(nodes, dict):
        return {t: np.asarray(torch.as_tensor(v).numpy(), np.int64).reshape(-1)
                for t, v in nodes.items()}
    if len(g.ntypes) != 1:
        raise DistError(f"seeds must be a dict keyed by node type for graph types {g.ntypes}")
    return {g.ntypes[0]: np.asarray(torch.as_tensor(nodes).numpy(), np.int64).reshape(-1)}


def _fanout_of(fanout: Any, etype: CanonicalEtype) -> int:
    if isinstance(fanout, dict):
        for key in (etype, etype[1], ":".join(etype)):
            if key in fanout:
                return int(fanout[key])
        return 0
    return int(fanout)


def sample_neighbors(
    g: DistGraph,
    nodes: Any,
    fanout: Any,
    edge_dir: str = "in",
    prob: str | None = None,
    exclude_edges: Any = None,
    replace: bool = False,
    seed: int = 0,
) -> dict[CanonicalEtype, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Sample up to ``fanout`` in-edges of every seed (per edge type with a dict fanout).

    Args:
        nodes: seed ids (per type: a dict ``{ntype: ids}`` for heterogeneous graphs).
        fanout: an int for every edge type, or ``{etype: int}`` (missing types: 0; -1: all).
        prob: name of an edge feature holding non-negative sampling weights.
        exclude_edges: edge ids (per type: ``{etype: ids}``) that must not be sampled.
        seed: sampling seed; the same seed gives the same edges in every process.

    Returns ``{canonical etype: (src ids, dst ids, edge ids)}`` in per-type ids.
    """
    if edge_dir != "in":
        raise DistError(
            "edge_dir='out' is not supported yet: partitions store each node's in-edges",
            hint="sample in-edges (the default); for symmetric graphs they are the same",
        )
    seeds = _as_seed_dict(g, nodes)
    book = g.get_partition_book()
    excl = _exclusions(g, exclude_edges)
    work: dict[int, list[tuple[int, CanonicalEtype, np.ndarray, np.ndarray, np.ndarray]]] = {}
    results: dict[CanonicalEtype, list[tuple[np.ndarray, ...]]] = {}
    for e, et in enumerate(g.canonical_etypes):
        f = _fanout_of(fanout, et)
        if et[2] not in seeds or f == 0:
            continue
        results[et] = []
        for m, sel, local in g._by_owner(seeds[et[2]], book.nodes, et[2]):
            sel_ids = seeds[et[2]][sel]
            work.setdefault(m, []).append((e, et, local, sel_ids, np.asarray(f)))
    pool = g._ctx.pool
    reqs, req_meta = [], []
    for m, items in work.items():
        if m == g.machine_id:
            for e, et, local, sel_ids, f in items:
                key = ":".join(et)
                indptr, indices = g._csc[key]
                weights = g._local_tensor(f"{key}/{prob}") if prob else None
                key_ids = g._local_tensor(f"orig:{et[2]}")[local]
                s_idx, src, pos = sample_on_part(
                    indptr, indices, local, key_ids, e, int(f), replace, seed,
                    weights, _local_excl(excl, book, m, et))
                results[et].append(_finish(book, m, e, et, sel_ids, s_idx, src, pos))
            continue
        arrays = []
        for _, et, local, _, _ in items:
            arrays += [local, _local_excl(excl, book, m, et, empty=True)]
        header = {"op": "sample", "etypes": [":".join(it[1]) for it in items],
                  "salts": [it[0] for it in items], "fanouts": [int(it[4]) for it in items],
                  "replace": replace, "seed": int(seed), "prob": prob}
        reqs.append(Request(m, pool.pick(m), header, arrays))
        req_meta.append((m, items))
    if reqs:
        for (m, items), (_, arrays) in zip(req_meta, pool.call_many(reqs), strict=True):
            for i, (e, et, _, sel_ids, _) in enumerate(items):
                s_idx, src, pos = arrays[3 * i:3 * i + 3]
                results[et].append(_finish(book, m, e, et, sel_ids, s_idx, src, pos))
    out = {}
    for et, chunks in results.items():
        if chunks:
            out[et] = tuple(np.concatenate([c[i] for c in chunks]) for i in range(3))
        else:
            empty = np.empty(0, np.int64)
            out[et] = (empty, empty, empty)
    return out


def _finish(book, m, e, et, sel_ids, s_idx, src_homo, pos):
    dst = sel_ids[s_idx]
    # One node type: per-type ids are the homogeneous ids.
    src = src_homo if len(book.ntypes) == 1 else book.map_to_per_ntype(src_homo)[1]
    eid = pos + book.edges.typed_start[m, e]
    return src, dst, eid


def _exclusions(g: DistGraph, exclude_edges: Any) -> dict[str, np.ndarray]:
    if exclude_edges is None:
        return {}
    if not isinstance(exclude_edges, dict):
        exclude_edges = {g.canonical_etypes[0]: exclude_edges}
    return {g._canonical(k): np.sort(np.asarray(torch.as_tensor(v).numpy(), np.int64))
            for k, v in exclude_edges.items()}


def _local_excl(excl, book, m, et, empty=False):
    """Excluded edges of ``et`` owned by machine ``m`` as sorted CSC positions."""
    key = ":".join(et)
    ids = excl.get(key)
    if ids is None or len(ids) == 0:
        return np.empty(0, np.int64) if empty else None
    e = book.edges.type_index(key)
    lo, hi = book.edges.typed_start[m, e], book.edges.typed_start[m + 1, e]
    sel = ids[(ids >= lo) & (ids < hi)]
    return sel - lo


_batch_key: tuple[int, int] | None = None


def set_batch_key(key: tuple[int, int] | None) -> None:
    """Tell samplers which (epoch, batch) they are sampling: its draws then depend on that
    alone, so a batch is the same whether a sampler process or the trainer samples it."""
    global _batch_key
    _batch_key = key


class NeighborSampler:
    """DGL's ``NeighborSampler(fanouts)``: one block per layer, input layer first.

    ``fanouts[i]`` is the fanout of layer i (an int or ``{etype: int}``). The seed form
    ``NeighborSampler(g, fanouts, ...)`` of the DGL guide is accepted too. Each call draws
    with a fresh sampling seed (``seed`` + call number), so runs with the same seed repeat.
    """

    def __init__(self, *args: Any, replace: bool = False, prob: str | None = None,
                 seed: int = 0, **_unused: Any) -> None:
        graph = None
        if args and isinstance(args[0], DistGraph):
            graph, args = args[0], args[1:]
        if not args:
            raise TypeError("NeighborSampler needs fanouts, e.g. NeighborSampler([10, 25])")
        self.g = graph
        self.fanouts = list(args[0])
        self.replace = replace
        self.prob = prob
        self.seed = seed
        self._calls = 0

    def sample_blocks(self, seeds: Any, g: DistGraph | None = None,
                      exclude_edges: Any = None) -> list[Block]:
        """The blocks for ``seeds`` (DGL's ``collate_fn`` shape: seeds in, blocks out)."""
        graph = g or self.g
        if graph is None:
            from .dist_graph import get_context

            graph = get_context().graphs[-1]
        self._calls += 1
        if _batch_key is not None:
            call_seed = (self.seed * 1_000_003 + _batch_key[0]) * 1_000_033 + _batch_key[1]
        else:
            call_seed = self.seed * 1_000_003 + self._calls
        dst = _as_seed_dict(graph, seeds)
        num_nodes = {t: graph.num_nodes(t) for t in graph.ntypes}
        blocks: list[Block] = []
        for layer, fanout in enumerate(reversed(self.fanouts)):
            sampled = sample_neighbors(graph, dst, fanout, prob=self.prob,
                                       exclude_edges=exclude_edges, replace=self.replace,
                                       seed=call_seed * 31 + layer)
            block = to_block(dst, sampled, num_nodes)
            blocks.insert(0, block)
            dst = {t: block._src_data[t]["_ID"].numpy() for t in block.ntypes}
        return blocks

    def sample(self, g: DistGraph, seeds: Any) -> tuple[Any, Any, list[Block]]:
        """DGL 1.x-style ``(input_nodes, output_nodes, blocks)``."""
        blocks = self.sample_blocks(seeds, g)
        return blocks[0].srcdata["_ID"], blocks[-1].dstdata["_ID"], blocks
