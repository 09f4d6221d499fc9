"""A ``DistGraph``'s structure queries: in/out degrees, ``find_edges`` and ``edge_subgraph``
(DGL's ``_distributed_access`` users), each one request per owner machine through the
graph's ``Router`` and this machine's share from its ``LocalPartition``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from partitioner.graph import etype_key, parse_etype_key
from partitioner.loader import check_out_edges

from .routing import Share, split_by_owner
from .rpc import messages as msg
from .sampling.block import EID, NID
from .sampling.graph import SampledGraph
from .view import DGLError

if TYPE_CHECKING:
    from .dist_graph import DistGraph


def in_degrees(g: DistGraph, v=None, etype=None) -> torch.Tensor:
    """In-degree of nodes ``v`` (homogeneous/per-type ids of the edge type's destination)."""
    key = etype_key(g.to_canonical_etype(etype))
    return degrees(g, v, key, parse_etype_key(key)[2], "in")


def out_degrees(g: DistGraph, u=None, etype=None) -> torch.Tensor:
    """Out-degree of nodes ``u`` (needs a partition written with out-edges)."""
    key = etype_key(g.to_canonical_etype(etype))
    check_out_edges(g.config)
    return degrees(g, u, key, parse_etype_key(key)[0], "out")


def degrees(g: DistGraph, nodes, key: str, ntype: str, edge_dir: str) -> torch.Tensor:
    """Degrees of ``nodes`` of ``ntype`` (all when None), from each owner machine."""
    if nodes is None:
        nodes = np.arange(g.num_nodes(ntype))
    ids = np.asarray(nodes, dtype=np.int64).reshape(-1)
    out = np.empty(len(ids), np.int64)

    def place(s: Share, reply: msg.DegreesReply) -> None:
        out[s.sel] = reply.degrees

    g.router.route(split_by_owner(ids, g.get_partition_book().nodes, ntype),
                   lambda s: msg.Degrees(key, edge_dir, s.local),
                   lambda s: msg.DegreesReply(g.local.degrees(key, s.local, edge_dir)),
                   place)
    return torch.from_numpy(out)


def find_edges(g: DistGraph, edges, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, dst)`` node ids of edge ids ``edges`` of ``etype``, per type as DGL returns
    them (on a graph of one node type those are the homogeneous ids)."""
    key = etype_key(g.to_canonical_etype(etype))
    ids = np.asarray(edges, dtype=np.int64).reshape(-1)
    src = np.empty(len(ids), np.int64)
    dst = np.empty(len(ids), np.int64)

    def place(s: Share, reply: msg.FindEdgesReply) -> None:
        src[s.sel], dst[s.sel] = reply.src, reply.dst

    book = g.get_partition_book()
    g.router.route(split_by_owner(ids, book.edges, key),
                   lambda s: msg.FindEdges(key, s.local),
                   lambda s: msg.FindEdgesReply(*g.local.find_edges(key, s.local)),
                   place)
    if len(g.ntypes) > 1:  # the parts answer in homogeneous ids
        src, dst = book.map_to_per_ntype(src)[1], book.map_to_per_ntype(dst)[1]
    return torch.from_numpy(np.asarray(src, np.int64)), \
        torch.from_numpy(np.asarray(dst, np.int64))


def edge_subgraph(g: DistGraph, edges: Any, relabel_nodes: bool = True,
                  store_ids: bool = True) -> SampledGraph:
    """The graph of edges ``edges`` (ids, or a dict of them per edge type) and their end
    nodes (DGL's): ``edata[EID]`` holds the edge ids; with ``relabel_nodes`` only the end
    nodes are kept, numbered from 0, ``ndata[NID]`` holding their ids."""
    if not store_ids:
        raise DGLError("edge_subgraph always stores the original node and edge ids")
    if not isinstance(edges, dict):
        edges = {None: edges}
    found: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray, torch.Tensor]] = {}
    for etype, ids in edges.items():
        c = g.to_canonical_etype(etype)
        eids = torch.as_tensor(np.asarray(ids, np.int64).reshape(-1))
        src, dst = find_edges(g, eids, c)
        found[c] = (src.numpy(), dst.numpy(), eids)
    num_nodes = {t: g.num_nodes(t) for t in g.ntypes}
    ndata: dict[str, dict[str, torch.Tensor]] = {}
    if relabel_nodes:
        ends: dict[str, list[np.ndarray]] = {t: [] for t in g.ntypes}
        for (st, _, dt), (s, d, _) in found.items():
            ends[st].append(s)
            ends[dt].append(d)
        kept = {t: np.unique(np.concatenate(v)) if v else np.empty(0, np.int64)
                for t, v in ends.items()}
        num_nodes = {t: len(v) for t, v in kept.items()}
        ndata = {t: {NID: torch.from_numpy(v)} for t, v in kept.items()}
        found = {c: (np.searchsorted(kept[c[0]], s), np.searchsorted(kept[c[2]], d), e)
                 for c, (s, d, e) in found.items()}
    return SampledGraph(num_nodes,
                        {c: (torch.from_numpy(s), torch.from_numpy(d))
                         for c, (s, d, _) in found.items()},
                        edata={c: {EID: e} for c, (_, _, e) in found.items()}, ndata=ndata)
