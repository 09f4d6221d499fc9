"""``DistGraph``: a trainer's view of the partitioned graph (structure, data, partition book).

Rows and edges this machine owns are read from shared memory through the machine's
``LocalPartition`` (the same operations its servers run); the others come from their machines'
servers, one request per machine per call (``runtime.routing``). Standalone (no launcher) the
graph is one partition read from its files.
"""

from __future__ import annotations

import logging
import os
from collections import namedtuple
from typing import Any

import numpy as np
import torch

from partitioner.format import PartConfig, read_config
from partitioner.graph import etype_key, parse_etype_key
from partitioner.partition_book import RangePartitionBook

from . import structure
from .context import current_pool, get_context
from .dist_tensor import DistTensor
from .env import torch_rank_world
from .errors import DistError
from .routing import Router
from .rpc import messages as msg
from .rpc.client import Request
from .sampling import neighbor
from .sampling.block import EID, NID
from .store.layout import feature_policy
from .store.local import LocalPartition
from .store.shm import ShmArena
from .tensor_store import TensorMeta, TensorStore
from .view import (
    DataView,
    DGLError,
    EdgePartitionPolicy,
    HeteroDataView,
    NodePartitionPolicy,
    TypeView,
)

__all__ = ["EID", "NID", "DistGraph", "Scheme"]

log = logging.getLogger(__name__)

Scheme = namedtuple("Scheme", ["shape", "dtype"])  # DGL's frame scheme: row shape and dtype


def _schemes(view: Any) -> dict[str, Scheme]:
    if not isinstance(view, DataView):
        raise DGLError("the graph has several types: read g.nodes[TYPE].data / "
                       "g.edges[TYPE].data instead")
    return {k: Scheme(tuple(t.shape[1:]), t.dtype) for k, t in view.items()}


def _check_other_name(graph_name: str, config: PartConfig, standalone: bool) -> None:
    """``DistGraph(graph_name)`` on a partition of another name: opened standalone, as DGL
    does there (DGL's own tests open ``test_sampling.json`` as ``"test_mp"``), with a log line
    saying which graph; refused in a launched job, where the name is what protects the run."""
    opened, path = config.graph_name, config.where
    if standalone:
        log.warning("DistGraph(%r): opened graph %r of %s (standalone: the part config's "
                    "graph, whatever the name, as DGL)", graph_name, opened, path)
        return
    # A job serves the launcher's partition and never reads the script's part_config: the
    # name is the one check that the job was launched with the graph the script means (in
    # DGL it also keys the servers' shared memory; here that is keyed by the job id).
    raise DistError(
        f"DistGraph({graph_name!r}): this job was launched with graph {opened!r} ({path}) "
        f"and its servers hold only that one; a launched job does not read the script's "
        f"part_config, so the name is the only check that the job serves the graph this "
        f"script means",
        hint=f"open it as DistGraph({opened!r}), the graph_name in {path}, or launch the job "
             f"with the partition of {graph_name!r}",
    )


class DistGraph:
    """The distributed graph (DGL's ``DistGraph(graph_name, gpb=None, part_config=None)``):
    structure and data spread over machines.

    Reads the partition config (JSON only; shards stay on their hosts) for the partition book
    and the feature schema; ``gpb`` (a partition book, e.g. from ``load_partition_book``)
    replaces the one built from the config. Standalone, a ``graph_name`` other than the
    config's opens the config's graph under the given name (as DGL; logged); in a launched
    job it is a DistError.
    """

    def __init__(self, graph_name: str, gpb: Any = None, part_config: str | None = None) -> None:
        if isinstance(gpb, str | os.PathLike):  # DistGraph(name, "parts/g.json")
            gpb, part_config = None, str(gpb)
        ctx = get_context()
        # As DGL: a launched job's partition is the launcher's (the script's part_config names
        # a path on the machine that partitioned, not on this host); standalone, the script's.
        path = ctx.env.part_config if ctx.env is not None else part_config
        if path is None:
            raise DistError(
                f"DistGraph({graph_name!r}): no part_config given and no launcher environment",
                hint="pass part_config='parts/NAME.json' to run standalone",
            )
        self.config = read_config(path)
        if self.config.graph_name != graph_name:
            _check_other_name(graph_name, self.config, ctx.standalone)
        # As DGL: the graph keeps the name it was given (a pickled handle reopens it so).
        self.graph_name = graph_name
        self._ctx = ctx
        self.machine_id = 0 if ctx.standalone else ctx.env.machine_id  # type: ignore[union-attr]
        self._book = RangePartitionBook(self.config, self.machine_id)
        if gpb is not None:
            if gpb.num_partitions() != self.config.num_parts:
                raise DistError(f"DistGraph({graph_name!r}): gpb has {gpb.num_partitions()} "
                                f"parts, {self.config.where} {self.config.num_parts}")
            self._book = gpb
        if ctx.standalone:
            if self.config.num_parts != 1:
                raise DistError(
                    f"standalone mode needs a 1-part partition; {self.config.where} has "
                    f"{self.config.num_parts}",
                    hint="run through 'dglctl launch', or partition with --num-parts 1",
                )
            self.local = LocalPartition.from_files(self.config, self._book)
        else:
            assert ctx.env is not None
            arena = ShmArena(ctx.env.job_id, self.machine_id, root=ctx.env.shm_root)
            manifest = arena.wait_manifest(ctx.env.timeout)
            self.local = LocalPartition.from_shm(arena, self.config, self._book)
            for name in manifest["tensors"]:
                self.local.tensor(name)
            for etype in self.config.etypes:
                self.local.csc(etype)
        ctx.graphs.append(self)
        self._barrier_count = 0
        self.router = Router(lambda: current_pool(ctx), self.machine_id)
        self.store = TensorStore(self.router, self._book, self.local, ctx.env, self.barrier)
        # DGL's _ndata_store / _edata_store: per type, view key -> DistTensor (any name).
        self._data: dict[str, dict[str, dict[str, Any]]] = {
            "node": {t: {} for t in self.ntypes},
            "edge": {etype_key(c): {} for c in self.canonical_etypes}}
        for kind in ("node", "edge"):
            for key, meta in self.config.feature_schema.get(kind, {}).items():
                self.store.add(key, TensorMeta(feature_policy(kind, key), tuple(meta["shape"]),
                                               np.dtype(meta["dtype"])))
                typ, name = key.rsplit("/", 1)
                self._data[kind][typ][name] = DistTensor.existing(self.store, key)
        # One type: that type's view; several: {type: DistTensor} per key (DGLGraph's).
        nodes, edges = self._data["node"], self._data["edge"]
        self.ndata = (DataView(nodes[self.ntypes[0]], f"node:{self.ntypes[0]}")
                      if len(nodes) == 1 else HeteroDataView(nodes, "node", self._ntype))
        only = etype_key(self.canonical_etypes[0])
        self.edata = (DataView(edges[only], f"edge:{only}")
                      if len(edges) == 1 else HeteroDataView(edges, "edge", self._canonical))
        self.nodes = TypeView(nodes, "node", self._ntype)
        self.edges = TypeView(edges, "edge", self._canonical)

    # --- structure -----------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        return sorted(self.config.ntypes, key=self.config.ntypes.__getitem__)

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        keys = sorted(self.config.etypes, key=self.config.etypes.__getitem__)
        return [parse_etype_key(k) for k in keys]

    @property
    def etypes(self) -> list[str]:
        return [c[1] for c in self.canonical_etypes]

    def _canonical(self, etype) -> str:
        if etype is None:
            if len(self.canonical_etypes) != 1:
                raise DGLError(f"the graph has several edge types; name one of "
                               f"{self.canonical_etypes}")
            return etype_key(self.canonical_etypes[0])
        try:
            key = etype_key(self._book.to_canonical_etype(etype))
        except ValueError as e:
            raise DGLError(str(e)) from None
        if key not in self.config.etypes:
            raise DGLError(f"edge type {etype!r} does not exist; the graph has "
                           f"{self.canonical_etypes}")
        return key

    def _ntype(self, ntype: Any) -> str:
        if ntype not in self.config.ntypes:
            raise DGLError(f"node type {ntype!r} does not exist; the graph has {self.ntypes}")
        return str(ntype)

    def to_canonical_etype(self, etype) -> tuple[str, str, str]:
        """The canonical ``(src type, edge type, dst type)`` of ``etype`` (DGLError if it is
        unknown or ambiguous)."""
        return parse_etype_key(self._canonical(etype))

    def num_nodes(self, ntype: str | None = None) -> int:
        """Number of nodes (of ``ntype``, or of every type)."""
        return self._book.num_nodes(ntype)

    def num_edges(self, etype=None) -> int:
        """Number of edges (of ``etype``, or of every type)."""
        return self._book.num_edges(etype)

    def number_of_nodes(self, ntype: str | None = None) -> int:
        return self.num_nodes(ntype)

    def number_of_edges(self, etype=None) -> int:
        return self.num_edges(etype)

    def get_partition_book(self) -> RangePartitionBook:
        """The range partition book (DGL's ``get_partition_book``)."""
        return self._book

    @property
    def local_partition(self):
        """This machine's partition (standalone only: in a job the servers hold it)."""
        return getattr(self.local, "part", None)

    def rank(self) -> int:
        """This trainer's rank among all trainers."""
        return torch_rank_world()[0]

    @property
    def idtype(self) -> torch.dtype:
        """The dtype of node and edge ids (always int64, as DGL's DistGraph)."""
        return torch.int64

    @property
    def device(self) -> torch.device:
        """Where the graph lives: the CPU (as DGL's DistGraph)."""
        return torch.device("cpu")

    def is_pinned(self) -> bool:
        return False

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return len(self.ntypes) == 1 and len(self.canonical_etypes) == 1

    def get_ntype_id(self, ntype: str | None) -> int:
        """The id of node type ``ntype`` (None: the only one)."""
        if ntype is None:
            if len(self.ntypes) != 1:
                raise DGLError("Node type name must be specified if there are more than one "
                               "node types.")
            return 0
        return int(self.config.ntypes[self._ntype(ntype)])

    def get_etype_id(self, etype) -> int:
        """The id of edge type ``etype`` (a name, a canonical triple, or None: the only one)."""
        return int(self.config.etypes[self._canonical(etype)])

    def get_node_partition_policy(self, ntype: str) -> NodePartitionPolicy:
        """The partition policy of node type ``ntype`` (for a new DistTensor's rows)."""
        self.get_ntype_id(ntype)
        return NodePartitionPolicy(self._book, ntype)

    def get_edge_partition_policy(self, etype) -> EdgePartitionPolicy:
        """The partition policy of edge type ``etype`` (a name or a canonical triple)."""
        return EdgePartitionPolicy(self._book, self.to_canonical_etype(etype))

    @property
    def _client(self) -> DistGraph:
        """DGL's ``g._client`` (its key-value client): DGL's examples call
        ``g._client.barrier()``, the trainers' barrier, which this graph's ``barrier`` is."""
        return self

    def barrier(self) -> None:
        """Wait until every trainer of the job has reached this call."""
        self._barrier_count += 1
        ctx = self._ctx
        if ctx.standalone:
            return
        assert ctx.env is not None and ctx.pool is not None
        total = len(ctx.pool.machines) * ctx.env.num_trainers
        self.router.call_many(
            [Request(0, 0, msg.Barrier(f"{self.graph_name}:{self._barrier_count}", total))],
            max_wait=ctx.env.barrier_timeout)

    # --- tensors -------------------------------------------------------------------------
    def node_attr_schemes(self) -> dict[str, Scheme]:
        """Row shape and dtype of each node data of ``g.ndata`` (DGL's)."""
        return _schemes(self.ndata)

    def edge_attr_schemes(self) -> dict[str, Scheme]:
        """Row shape and dtype of each edge data of ``g.edata`` (DGL's)."""
        return _schemes(self.edata)

    def count_nonzero(self, key: str) -> int:
        """Non-zero values of tensor ``key`` on every machine (DistTensor.count_nonzero)."""
        return self.store.count_nonzero(key)

    # --- degrees and edges (runtime.structure) -------------------------------------------
    def in_degrees(self, v=None, etype=None) -> torch.Tensor:
        """In-degree of nodes ``v`` (homogeneous/per-type ids of the edge type's destination)."""
        return structure.in_degrees(self, v, etype)

    def out_degrees(self, u=None, etype=None) -> torch.Tensor:
        """Out-degree of nodes ``u`` (homogeneous/per-type ids of the edge type's source).

        Needs a partition written with out-edges (the default; not ``--no-out-edges``).
        """
        return structure.out_degrees(self, u, etype)

    def find_edges(self, edges, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` node ids of edge ids ``edges`` of ``etype``, per type as DGL returns
        them (the ids of the edge type's source and destination types)."""
        return structure.find_edges(self, edges, etype)

    def edge_subgraph(self, edges: Any, relabel_nodes: bool = True, store_ids: bool = True):
        """The graph of edges ``edges`` and their end nodes (DGL's; see
        ``runtime.structure.edge_subgraph``)."""
        return structure.edge_subgraph(self, edges, relabel_nodes, store_ids)

    def sample_neighbors(self, seed_nodes, fanout, edge_dir="in", prob=None,
                         exclude_edges=None, replace=False, etype_sorted=True,
                         output_device=None):
        """DGL's method: :func:`runtime.sample_etype_neighbors` on a graph of several edge
        types, else :func:`runtime.sample_neighbors` (DGL ignores ``edge_dir`` and
        ``exclude_edges`` here; this honours them). ``output_device`` is accepted (CPU)."""
        return neighbor.sample_etype_neighbors(
            self, seed_nodes, fanout, edge_dir=edge_dir, prob=prob, replace=replace,
            exclude_edges=exclude_edges)

    def __reduce__(self):
        """Pickled as a handle, like DGL's (name and partition): unpickled in a process that
        called ``initialize()``, it opens the graph again there."""
        return DistGraph, (self.graph_name, None, str(self.config.file))
