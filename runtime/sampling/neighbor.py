"""Distributed neighbour sampling: DGL's ``sample_neighbors``, ``sample_etype_neighbors``,
``in_subgraph`` (each returns a ``SampledGraph``) and ``NeighborSampler``; the edges
themselves (``sample_neighbor_edges``) for the library's own use.

Seeds are grouped by the machine that owns them; the local machine samples from shared memory,
every other machine gets one request carrying all edge types, sent together. Results are
per-type ids, so they index features directly. In-edges come from each part's CSC, out-edges
(``edge_dir="out"``) from its out-CSR: a part stores the out-edges of the nodes it owns, so
both directions are answered by the seed's machine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from partitioner.graph import etype_key
from partitioner.loader import check_out_edges

from ..context import get_context
from ..errors import DistError
from ..routing import split_by_owner
from ..rpc import messages as msg
from .block import EID, NID, Block, block_from_edges
from .draws import OUT_SALT
from .graph import SampledGraph

if TYPE_CHECKING:  # dist_graph imports this module (DistGraph.sample_neighbors)
    from ..dist_graph import DistGraph

CanonicalEtype = tuple[str, str, str]


def _is_graph(x: Any) -> bool:
    """A DistGraph (by its partition book; this module cannot import the class at run time:
    dist_graph imports it for ``DistGraph.sample_neighbors``)."""
    return callable(getattr(x, "get_partition_book", None))


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


def sample_neighbors(g: DistGraph, nodes: Any, fanout: Any, edge_dir: str = "in",
                     prob: str | None = None, replace: bool = False, **kwargs: Any
                     ) -> SampledGraph:
    """DGL's ``sample_neighbors``: up to ``fanout`` in-edges (or out-edges) of every seed.

    Returns a ``SampledGraph`` holding every node of ``g`` (per type) and only the sampled
    edges, in ``g``'s direction, their edge ids in ``edata[EID]``. On a heterograph ``nodes``
    is ``{ntype: ids}`` and the fanout applies to each edge type (as DGL's
    ``sample_etype_neighbors``; DGL's ``sample_neighbors`` draws over all types at once).
    ``exclude_edges=`` and ``seed=`` as :func:`sample_neighbor_edges`.
    """
    sampled = sample_neighbor_edges(g, nodes, fanout, edge_dir=edge_dir, prob=prob,
                                    replace=replace, **kwargs)
    return _as_graph(g, sampled)


def sample_etype_neighbors(g: DistGraph, nodes: Any, fanout: Any, edge_dir: str = "in",
                           prob: str | None = None, replace: bool = False,
                           etype_sorted: bool = True, **kwargs: Any) -> SampledGraph:
    """DGL's ``sample_etype_neighbors``: up to ``fanout[etype]`` edges of every seed per edge
    type (an int: the same for every type). A dict must name every edge type, as in DGL.
    ``etype_sorted`` is accepted and has no effect (each type is stored on its own)."""
    if isinstance(fanout, dict):
        missing = [et for et in g.canonical_etypes
                   if not any(k in fanout for k in (et, et[1], ":".join(et)))]
        if missing:
            raise DistError(f"fanout {fanout} names no fanout for edge types {missing}",
                            hint="give every edge type a fanout (0: none, -1: all)")
    return sample_neighbors(g, nodes, fanout, edge_dir=edge_dir, prob=prob, replace=replace,
                            **kwargs)


def in_subgraph(g: DistGraph, nodes: Any) -> SampledGraph:
    """DGL's ``in_subgraph``: every in-edge of ``nodes``, as a ``SampledGraph`` on all nodes."""
    return sample_neighbors(g, nodes, -1)


def _as_graph(g: DistGraph, sampled: dict) -> SampledGraph:
    empty = np.empty(0, np.int64)
    edges, edata = {}, {}
    for et in g.canonical_etypes:
        src, dst, eid = sampled.get(et, (empty, empty, empty))
        edges[et] = (src, dst)
        edata[et] = {EID: torch.from_numpy(np.asarray(eid, np.int64))}
    return SampledGraph({t: g.num_nodes(t) for t in g.ntypes}, edges, edata)


def sample_neighbor_edges(
    g: DistGraph,
    nodes: Any,
    fanout: Any,
    edge_dir: str = "in",
    prob: str | None = None,
    exclude_edges: Any = None,
    replace: bool = False,
    seed: int = 0,
) -> dict[CanonicalEtype, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Sample up to ``fanout`` in-edges (or out-edges) of every seed, per edge type (the
    edges of :func:`sample_neighbors`, without building a graph).

    Args:
        nodes: seed ids (per type: a dict ``{ntype: ids}`` for heterogeneous graphs).
        fanout: an int for every edge type, or ``{etype: int}`` (missing types: 0; -1: all).
            With ``edge_dir="out"`` the edge types sampled for a seed are those whose
            *source* type is the seed's type (with "in", those whose destination type is).
        edge_dir: ``"in"``: in-edges of the seeds (the seeds are the destinations).
            ``"out"``: out-edges of the seeds (the seeds are the sources), as DGL's
            ``sample_neighbors(..., edge_dir="out")``; needs a partition written with
            out-edges (the default of ``dglctl partition``).
        prob: name of an edge feature holding non-negative sampling weights ("in" only: an
            edge's weight is stored with its destination's machine, not the seed's).
        exclude_edges: edge ids (per type: ``{etype: ids}``) that must not be sampled.
        seed: sampling seed; the same seed gives the same edges in every process, and the
            same edges for any number of parts.

    Returns ``{canonical etype: (src ids, dst ids, edge ids)}`` in per-type ids, each edge in
    the graph's direction (with "out", ``src`` are seeds and ``dst`` their out-neighbours).
    """
    return _sample_edges(g, nodes, fanout, edge_dir, prob, exclude_edges, replace, seed,
                         seed_positions=False)


def _sample_edges(g: DistGraph, nodes: Any, fanout: Any, edge_dir: str, prob: str | None,
                  exclude_edges: Any, replace: bool, seed: int, *, seed_positions: bool
                  ) -> dict[CanonicalEtype, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`sample_neighbor_edges`; with ``seed_positions`` each edge's seed end holds the
    seed's position in ``nodes[type]`` rather than its id (a block's destination index, with
    no lookup of the ids: see ``block_from_edges(dst_positions=True)``)."""
    out_dir = _check_edge_dir(edge_dir, prob)
    prob = prob_tensor_name(g, prob)  # g.edata["p"] = DistTensor(..., name="other")
    if out_dir:
        check_out_edges(g.config)  # written with --no-out-edges: name the fix
    seeds = _as_seed_dict(g, nodes)
    book = g.get_partition_book()
    excl = _exclusions(g, exclude_edges)
    seed_end = 0 if out_dir else 2  # which end of an edge type the seeds are
    work: dict[int, _MachineWork] = {}
    results: dict[CanonicalEtype, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for e, et in enumerate(g.canonical_etypes):
        f = _fanout_of(fanout, et)
        st = et[seed_end]
        if st not in seeds or f == 0:
            continue
        results[et] = []
        for share in split_by_owner(seeds[st], book.nodes, st):
            w = work.setdefault(share.machine, _MachineWork(share.machine))
            ends = (np.arange(len(seeds[st]))[share.sel] if seed_positions
                    else seeds[st][share.sel])
            w.items.append(_EtypeWork(e, et, share.local, ends,
                                      _excluded(excl, book, share.machine, et, out_dir), f))
    dir_name = "out" if out_dir else "in"

    def request(w: _MachineWork) -> msg.Sample:
        return msg.Sample([":".join(it.et) for it in w.items],
                          [_salt(it.e, out_dir) for it in w.items], [it.fanout for it in w.items],
                          bool(replace), int(seed), prob, dir_name,
                          [it.local for it in w.items], [it.excluded for it in w.items])

    def local(w: _MachineWork) -> msg.SampleReply:
        reply = msg.SampleReply()
        for it in w.items:
            s_idx, nbr, ids = g.local.sample(":".join(it.et), it.local, _salt(it.e, out_dir),
                                             it.fanout, replace, seed, prob, it.excluded,
                                             dir_name)
            reply.seed_idx.append(s_idx)
            reply.nbrs.append(nbr)
            reply.eids.append(ids)
        return reply

    def place(w: _MachineWork, reply: msg.SampleReply) -> None:
        for i, it in enumerate(w.items):
            results[it.et].append(_finish(book, w.machine, it.e, it.et, it.seeds,
                                          reply.seed_idx[i], reply.nbrs[i], reply.eids[i],
                                          out_dir))

    g.router.route(list(work.values()), request, local, place)
    out: dict[CanonicalEtype, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for et, chunks in results.items():
        if len(chunks) == 1:
            out[et] = chunks[0]
        elif chunks:
            out[et] = (np.concatenate([c[0] for c in chunks]),
                       np.concatenate([c[1] for c in chunks]),
                       np.concatenate([c[2] for c in chunks]))
        else:
            empty = np.empty(0, np.int64)
            out[et] = (empty, empty, empty)
    return out


@dataclass
class _EtypeWork:
    """The seeds of one edge type that one machine samples."""

    e: int
    et: CanonicalEtype
    local: np.ndarray
    seeds: np.ndarray  # the seeds' ids, or their positions among the call's seeds
    excluded: np.ndarray
    fanout: int


@dataclass
class _MachineWork:
    """Everything one machine samples in one call: one request carrying every edge type."""

    machine: int
    items: list[_EtypeWork] = field(default_factory=list)


def _check_edge_dir(edge_dir: str, prob: str | None) -> bool:
    """True for "out"; a DistError for anything but "in"/"out", or prob= with "out"."""
    if edge_dir not in ("in", "out"):
        raise DistError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    if edge_dir == "out" and prob is not None:
        raise DistError(
            f"prob={prob!r} is not supported with edge_dir='out': an edge's weight is stored "
            "on the machine of its destination, not of the seed that samples it",
            hint="sample without prob=, or sample in-edges",
        )
    return edge_dir == "out"


def _salt(e: int, out_dir: bool) -> int:
    return e + OUT_SALT if out_dir else e


def _finish(book, m, e, et, sel_ids, s_idx, nbr_homo, ids, out_dir):
    """One machine's sampled edges of ``et`` as per-type int64 ids (a server's reply carries
    int32 where the ids fit)."""
    seeds = sel_ids[s_idx]
    # One node type: per-type ids are the homogeneous ids.
    nbr = nbr_homo if len(book.ntypes) == 1 else book.map_to_per_ntype(nbr_homo)[1]
    nbr = np.asarray(nbr, np.int64)
    if out_dir:  # ids are homogeneous edge ids (the seed's machine stores other parts' edges)
        eid = ids if len(book.etypes) == 1 else book.map_to_per_etype(ids)[1]
        return seeds, nbr, np.asarray(eid, np.int64)
    eid = np.asarray(ids, np.int64) + book.edges.typed_start[m, e]  # CSC positions on m
    return nbr, seeds, eid


def prob_tensor_name(g: DistGraph, prob: str | None) -> str | None:
    """The tensor name to sample ``prob=`` from: the stored name of view key ``prob`` of
    every edge type that has it (``g.edata["p"] = DistTensor(..., name="other")`` is stored as
    ``"S:E:D/other"``, which the servers read)."""
    if prob is None:
        return None
    names = {t.name.rsplit("/", 1)[1] for c in g.canonical_etypes
             if (t := g.edges[c].data.get(prob)) is not None}
    if len(names) > 1:
        raise DistError(f"prob={prob!r} names tensors of different names on different "
                        f"edge types ({sorted(names)})",
                        hint="give the weight tensors of every edge type the same name")
    return names.pop() if names else prob


def _exclusions(g: DistGraph, exclude_edges: Any) -> dict[str, np.ndarray]:
    if exclude_edges is None:
        return {}
    if not isinstance(exclude_edges, dict):
        exclude_edges = {g.canonical_etypes[0]: exclude_edges}
    return {etype_key(g.to_canonical_etype(k)): np.sort(np.asarray(torch.as_tensor(v).numpy(), np.int64))
            for k, v in exclude_edges.items()}


def _excluded(excl, book, m, et, out_dir):
    """Excluded edges of ``et`` as machine ``m`` needs them: sorted CSC positions of the edges
    it owns ("in"), or every excluded edge as sorted homogeneous edge ids ("out": a seed's
    out-edges may belong to any machine)."""
    key = ":".join(et)
    ids = excl.get(key)
    if ids is None or len(ids) == 0:
        return np.empty(0, np.int64)
    if out_dir:
        return np.sort(book.map_to_homo_eid(ids, key))
    e = book.edges.type_index(key)
    lo, hi = book.edges.typed_start[m, e], book.edges.typed_start[m + 1, e]
    sel = ids[(ids >= lo) & (ids < hi)]
    return sel - lo


_batch = threading.local()  # per thread: a loader's prefetch thread samples its own batch


def current_batch_key() -> tuple[int, int] | None:
    """The (epoch, batch) this thread is sampling, if a loader said so (``set_batch_key``)."""
    return getattr(_batch, "key", None)


def set_batch_key(key: tuple[int, int] | None) -> None:
    """Tell samplers which (epoch, batch) this thread samples: its draws then depend on that
    alone, so a batch is the same whether a sampler process, a prefetch thread or the
    trainer samples it."""
    _batch.key = key


class NeighborSampler:
    """DGL's ``NeighborSampler(fanouts, edge_dir="in")``: one block per layer, input layer first.

    ``fanouts[i]`` is the fanout of layer i (an int or ``{etype: int}``). The seed form
    ``NeighborSampler(g, fanouts, ...)`` of the DGL guide is accepted too, and so is DGL's
    positional ``NeighborSampler(fanouts, "out")``. Each call draws with a fresh sampling seed
    (``seed`` + call number), so runs with the same seed repeat.

    With ``edge_dir="out"`` each layer samples out-edges of its seeds and the block
    aggregates *from the sampled out-neighbours into the seeds*: the seeds are the block's
    destination nodes (first among its source nodes, as always), their sampled
    out-neighbours its other source nodes, and each sampled graph edge ``seed -> v`` becomes
    the block edge ``v -> seed``. So the block's edge types are the graph's reversed:
    sampling ``(stype, etype, dtype)`` gives block edges of type ``(dtype, etype, stype)``
    whose ``edata[EID]`` are ids of the graph's ``(stype, etype, dtype)`` edges. (DGL 1.1.3
    passes the out-frontier to ``to_block(frontier, seeds)``, which fails as soon as a seed
    has an out-neighbour that is not a seed: the neighbours are the edges' destinations.)
    Per-edge-type fanouts name the graph's edge types (those leaving the seeds' types).
    """

    def __init__(self, *args: Any, edge_dir: str = "in", replace: bool = False,
                 prob: str | None = None, seed: int = 0, **_unused: Any) -> None:
        graph = None
        if args and _is_graph(args[0]):
            graph, args = args[0], args[1:]
        if not args:
            raise TypeError("NeighborSampler needs fanouts, e.g. NeighborSampler([10, 25])")
        if graph is None and len(args) > 1 and isinstance(args[1], str):
            edge_dir = args[1]  # DGL 1.x: NeighborSampler(fanouts, edge_dir, ...)
        _check_edge_dir(edge_dir, prob)
        self.g = graph
        self.fanouts = list(args[0])
        self.edge_dir = edge_dir
        self.replace = replace
        self.prob = prob
        self.seed = seed
        self._calls = 0

    def sample_blocks(self, seeds: Any, g: Any = None, exclude_edges: Any = None,
                      exclude_eids: Any = None) -> Any:
        """The blocks for ``seeds`` (DGL 0.x's ``collate_fn`` shape: seeds in, blocks out).

        DGL 1.x's ``sample_blocks(g, seed_nodes, exclude_eids=None)`` (the graph first) returns
        ``(input_nodes, output_nodes, blocks)`` as DGL 1.x does.
        """
        if _is_graph(seeds):  # DGL 1.x: sample_blocks(g, seed_nodes, ...)
            return self.sample(seeds, g, exclude_edges=exclude_edges
                               if exclude_eids is None else exclude_eids)
        if exclude_eids is not None:
            exclude_edges = exclude_eids
        graph = g or self.g
        if graph is None:
            graph = get_context().current_graph()
        self._calls += 1
        batch_key = current_batch_key()
        if batch_key is not None:
            call_seed = (self.seed * 1_000_003 + batch_key[0]) * 1_000_033 + batch_key[1]
        else:
            call_seed = self.seed * 1_000_003 + self._calls
        dst = _as_seed_dict(graph, seeds)
        num_nodes = {t: graph.num_nodes(t) for t in graph.ntypes}
        blocks: list[Block] = []
        for layer, fanout in enumerate(reversed(self.fanouts)):
            # Each edge's seed comes as its position among the seeds: the block's index of
            # the destination, without looking the ids up again.
            sampled = _sample_edges(graph, dst, fanout, self.edge_dir, self.prob,
                                    exclude_edges, self.replace, call_seed * 31 + layer,
                                    seed_positions=True)
            if self.edge_dir == "out":  # messages flow from the out-neighbours to the seeds
                sampled = {(et[2], et[1], et[0]): (nbr, seed_pos, eid)
                           for et, (seed_pos, nbr, eid) in sampled.items()}
            block = block_from_edges(dst, sampled, num_nodes, dst_positions=True)
            blocks.insert(0, block)
            dst = {t: block.srcnodes[t].data[NID].numpy() for t in block.ntypes}
        return blocks

    def sample(self, g: DistGraph, seeds: Any, exclude_edges: Any = None
               ) -> tuple[Any, Any, list[Block]]:
        """DGL 1.x-style ``(input_nodes, output_nodes, blocks)``."""
        blocks = self.sample_blocks(seeds, g, exclude_edges=exclude_edges)
        return blocks[0].srcdata[NID], blocks[-1].dstdata[NID], blocks


# DGL 1.x: MultiLayerNeighborSampler(fanouts, ...) is NeighborSampler.
MultiLayerNeighborSampler = NeighborSampler
