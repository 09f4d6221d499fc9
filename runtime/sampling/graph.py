"""``SampledGraph``: the small DGLGraph that sampling and the edge loaders return (typed nodes
counted, typed edges listed, node and edge data); ``PairGraph``, a batch's positive or negative
edges between its seed nodes; and DGL's ``to_block(graph, dst_nodes)``.

A graph that ``sample_neighbors`` returns keeps every node of the DistGraph (``num_nodes`` is
the DistGraph's, per type) and only the sampled edges, whose graph edge ids are in
``edata[EID]``, as DGL's. Node ids are the DistGraph's (per type on a heterograph).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from .block import (
    EID,
    NID,
    Block,
    _EdgeSpace,
    _NodeData,
    _TypedData,
    block_from_edges,
    resolve_etype,
)

CanonicalEtype = tuple[str, str, str]


def _resolve_ntype(num_nodes: dict[str, int], ntype: str | None) -> str:
    if ntype is None:
        if len(num_nodes) != 1:
            raise KeyError(f"several node types; name one of {list(num_nodes)}")
        return next(iter(num_nodes))
    if ntype not in num_nodes:
        raise KeyError(f"node type {ntype!r} not in {list(num_nodes)}")
    return ntype


class _NodeTypes:
    """``g.nodes``: called, the node ids ``0..n-1`` of a type; indexed, ``g.nodes[t].data``.
    (Holds the graph's dicts, not the graph: no reference cycle, see ``_EdgeSpace``.)"""

    def __init__(self, num_nodes: dict[str, int], ndata: dict[str, dict]) -> None:
        self._num_nodes, self._ndata = num_nodes, ndata

    def __call__(self, ntype: str | None = None) -> torch.Tensor:
        return torch.arange(self._num_nodes[_resolve_ntype(self._num_nodes, ntype)])

    def __getitem__(self, ntype: str) -> _NodeData:
        return _NodeData(self._ndata[_resolve_ntype(self._num_nodes, ntype)])


class _Rows(Mapping):
    """``edges.src`` / ``edges.dst`` in ``apply_edges``: node data gathered per edge."""

    def __init__(self, data: dict[str, torch.Tensor], idx: torch.Tensor) -> None:
        self._data, self._idx = data, idx

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._data[key][self._idx]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class EdgeBatch:
    """What an ``apply_edges`` function receives, as DGL's: ``src``, ``dst`` (node data of each
    edge's ends), ``data`` (edge data), ``canonical_etype``."""

    def __init__(self, graph: SampledGraph, etype: CanonicalEtype) -> None:
        self._src, self._dst = graph._edges[etype]
        self.canonical_etype = etype
        self.src = _Rows(graph._ndata[etype[0]], self._src)
        self.dst = _Rows(graph._ndata[etype[2]], self._dst)
        self.data = graph._edata[etype]

    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(src, dst, edge id)`` of the batch."""
        return self._src, self._dst, torch.arange(len(self._src))

    def batch_size(self) -> int:
        """Number of edges."""
        return int(self._src.shape[0])


class SampledGraph:
    """A graph on ``num_nodes`` nodes per type with the given edges per canonical edge type.

    ``edges()``, ``edges[etype].data``, ``nodes[t].data``, ``ndata``/``edata`` (real mappings:
    with one type a tensor per key, with several a dict keyed by type), ``num_nodes``,
    ``num_edges``, degrees, ``apply_edges``, ``local_scope`` and ``to(device)`` as DGL's.
    """

    is_block = False

    def __init__(self, num_nodes: dict[str, int],
                 edges: dict[CanonicalEtype, tuple[Any, Any]],
                 edata: dict[CanonicalEtype, dict[str, torch.Tensor]] | None = None,
                 ndata: dict[str, dict[str, torch.Tensor]] | None = None) -> None:
        self._num_nodes = {t: int(n) for t, n in num_nodes.items()}
        self._edges = {et: (_tensor(s), _tensor(d)) for et, (s, d) in edges.items()}
        self._ndata = {t: dict((ndata or {}).get(t, {})) for t in self._num_nodes}
        self._edata = {et: dict((edata or {}).get(et, {})) for et in self._edges}
        self._views()

    def layout(self) -> tuple[dict[str, int], dict[CanonicalEtype, tuple[Any, Any]],
                              dict[CanonicalEtype, dict[str, torch.Tensor]],
                              dict[str, dict[str, torch.Tensor]]]:
        """``(num_nodes, edges, edata, ndata)`` as the constructor takes them (how a batch
        crosses processes)."""
        return self._num_nodes, self._edges, self._edata, self._ndata

    def _views(self) -> None:
        self.ndata = _TypedData(self._ndata)
        self.edata = _TypedData(self._edata)
        self.srcdata = self.dstdata = self.ndata
        self.nodes = _NodeTypes(self._num_nodes, self._ndata)
        self.edges = _EdgeSpace(self._edges, self._edata)

    # --- types -------------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        return list(self._num_nodes)

    @property
    def canonical_etypes(self) -> list[CanonicalEtype]:
        return list(self._edges)

    @property
    def etypes(self) -> list[str]:
        return [c[1] for c in self._edges]

    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return len(self._num_nodes) == 1 and len(self._edges) == 1

    def to_canonical_etype(self, etype: Any) -> CanonicalEtype:
        """The canonical edge type named ``etype`` (a name or a canonical triple)."""
        return self._etype(etype)

    def _etype(self, etype: Any) -> CanonicalEtype:
        return resolve_etype(self._edges, etype)

    def _ntype(self, ntype: str | None) -> str:
        return _resolve_ntype(self._num_nodes, ntype)

    # --- sizes, edges, degrees ---------------------------------------------------------------
    def num_nodes(self, ntype: str | None = None) -> int:
        """Number of nodes of ``ntype`` (of every type when None)."""
        if ntype is None:
            return sum(self._num_nodes.values())
        return self._num_nodes[self._ntype(ntype)]

    def number_of_nodes(self, ntype: str | None = None) -> int:
        return self.num_nodes(ntype)

    def num_edges(self, etype: Any = None) -> int:
        """Number of edges of ``etype`` (of every type when None)."""
        if etype is None:
            return sum(int(s.shape[0]) for s, _ in self._edges.values())
        return int(self._edges[self._etype(etype)][0].shape[0])

    def number_of_edges(self, etype: Any = None) -> int:
        return self.num_edges(etype)

    def find_edges(self, eid: Any, etype: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` of this graph's edges ``eid``."""
        src, dst = self._edges[self._etype(etype)]
        idx = torch.as_tensor(eid, dtype=torch.int64)
        return src[idx], dst[idx]

    def in_degrees(self, v: Any = None, etype: Any = None) -> torch.Tensor:
        """In-degree of nodes ``v`` (all when None) in this graph."""
        et = self._etype(etype)
        deg = torch.bincount(self._edges[et][1], minlength=self._num_nodes[et[2]])
        return deg if v is None else deg[torch.as_tensor(v, dtype=torch.int64)]

    def out_degrees(self, u: Any = None, etype: Any = None) -> torch.Tensor:
        """Out-degree of nodes ``u`` (all when None) in this graph."""
        et = self._etype(etype)
        deg = torch.bincount(self._edges[et][0], minlength=self._num_nodes[et[0]])
        return deg if u is None else deg[torch.as_tensor(u, dtype=torch.int64)]

    # --- computing on edges ------------------------------------------------------------------
    def apply_edges(self, func: Callable[[EdgeBatch], dict[str, torch.Tensor]],
                    edges: Any = None, etype: Any = None) -> None:
        """``edata.update(func(edge batch))`` for the edges of ``etype`` (every type that has
        the node data ``func`` reads, when None): ``func`` is a function of an ``EdgeBatch``
        or a built-in such as ``runtime.loader.function.u_dot_v("h", "h", "score")``."""
        if edges is not None:
            raise NotImplementedError("apply_edges on a subset of edges: pass edges=None")
        types = [self._etype(etype)] if etype is not None or len(self._edges) == 1 \
            else list(self._edges)
        for et in types:
            try:
                out = func(EdgeBatch(self, et))
            except KeyError:
                if etype is None and len(types) > 1:
                    continue  # this type's nodes lack the data: DGL skips such types too
                raise
            self._edata[et].update(out)

    @contextlib.contextmanager
    def local_scope(self) -> Iterator[SampledGraph]:
        """Data set inside the ``with`` block is gone after it (DGL's ``local_scope``)."""
        saved_n = {t: dict(d) for t, d in self._ndata.items()}
        saved_e = {et: dict(d) for et, d in self._edata.items()}
        try:
            yield self
        finally:
            for t, d in saved_n.items():
                self._ndata[t].clear()
                self._ndata[t].update(d)
            for et, d in saved_e.items():
                self._edata[et].clear()
                self._edata[et].update(d)

    def to(self, device: Any, **kwargs: Any) -> SampledGraph:
        """A copy with every tensor on ``device``."""
        return self.map_tensors(lambda v: v.to(device, **kwargs))

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> SampledGraph:
        """A copy with ``fn`` applied to every tensor (edges and data)."""
        out = self.__class__.__new__(self.__class__)
        out._num_nodes = dict(self._num_nodes)
        out._edges = {et: (fn(s), fn(d)) for et, (s, d) in self._edges.items()}
        out._ndata = {t: {k: fn(v) for k, v in d.items()} for t, d in self._ndata.items()}
        out._edata = {et: {k: fn(v) for k, v in d.items()} for et, d in self._edata.items()}
        out._views()
        return out

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}: {n}" for t, n in self._num_nodes.items())
        edges = ", ".join(f"{et}: {int(s.shape[0])}" for et, (s, _) in self._edges.items())
        return f"{type(self).__name__}(num_nodes={{{nodes}}}, num_edges={{{edges}}})"


class PairGraph(SampledGraph):
    """A batch's positive or negative edges between its seed nodes (DGL's pair graph).

    Node ``i`` of type ``t`` is seed ``nodes[t].data[NID][i]``, the ``i``-th destination node of
    the batch's last block; a positive pair graph's ``edata[EID]`` are the graph's edge ids.
    Made by the edge loaders; ``PairGraph(src, dst, nids, eids)`` builds a homogeneous one.
    """

    def __init__(self, src: Any, dst: Any, nids: Any, eids: Any = None,
                 etype: CanonicalEtype = ("_N", "_E", "_N")) -> None:
        nids = _tensor(nids)
        super().__init__({etype[0]: len(nids)}, {etype: (src, dst)},
                         None if eids is None else {etype: {EID: _tensor(eids)}},
                         {etype[0]: {NID: nids}})

    @classmethod
    def typed(cls, seeds: dict[str, torch.Tensor],
              edges: dict[CanonicalEtype, tuple[Any, Any]],
              eids: dict[CanonicalEtype, torch.Tensor] | None = None) -> PairGraph:
        """A pair graph of several types: ``seeds`` per node type, edges per edge type."""
        out = cls.__new__(cls)
        SampledGraph.__init__(out, {t: len(v) for t, v in seeds.items()}, edges,
                              None if eids is None else {et: {EID: v} for et, v in eids.items()},
                              {t: {NID: _tensor(v)} for t, v in seeds.items()})
        return out

    @property
    def src(self) -> torch.Tensor:
        """Local source indices (one edge type)."""
        return self.edges()[0]

    @property
    def dst(self) -> torch.Tensor:
        """Local destination indices (one edge type)."""
        return self.edges()[1]


def to_block(g: SampledGraph, dst_nodes: Any = None, include_dst_in_src: bool = True,
             src_nodes: Any = None) -> Block:
    """DGL's ``to_block(g, dst_nodes)``: the block of ``g``'s edges into ``dst_nodes``.

    The destination nodes are ``dst_nodes`` (per type: a dict) in their order, or every node
    with an in-edge (ascending) when None; the source nodes are the destination nodes followed
    by the other edge sources in order of first appearance. ``block.edata[EID]`` are positions
    among ``g``'s edges of that type, as DGL's (copy ``g.edata[EID]`` for the graph's ids).
    """
    if not include_dst_in_src or src_nodes is not None:
        raise NotImplementedError("to_block: only include_dst_in_src=True, src_nodes=None")
    edges = {et: tuple(t.numpy() for t in g.edges(etype=et)) for et in g.canonical_etypes}
    if dst_nodes is None:
        dst: dict[str, np.ndarray] = {}
        for et, (_, d) in edges.items():
            dst[et[2]] = np.union1d(dst.get(et[2], np.empty(0, np.int64)), d)
    elif isinstance(dst_nodes, Mapping):
        dst = {t: _array(v) for t, v in dst_nodes.items()}
    else:
        dst = {g._ntype(None) if len(g.ntypes) == 1 else g.canonical_etypes[0][2]:
               _array(dst_nodes)}
    for et in edges:
        dst.setdefault(et[2], np.empty(0, np.int64))
    sampled = {et: (s, d, np.arange(len(s), dtype=np.int64)) for et, (s, d) in edges.items()}
    block = block_from_edges(dst, sampled, {t: g.num_nodes(t) for t in g.ntypes})
    for et in block.canonical_etypes:
        d_local = block.edges(etype=et)[1]
        if len(d_local) and int(d_local.max()) >= block.num_dst_nodes(et[2]):
            raise ValueError(f"to_block: an edge of {et} ends at a node that is not in "
                             "dst_nodes")
    return block


def _tensor(x: Any) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.asarray(x, np.int64) if x.dtype != np.int64 else x)
    return torch.as_tensor(x)


def _array(x: Any) -> np.ndarray:
    return np.asarray(torch.as_tensor(x).numpy(), np.int64).reshape(-1)
