"""``initialize`` and ``DistGraph``: a trainer's view of the partitioned graph.

In a job started by ``dglctl launch`` the env contract says what this process is: a server
serves and exits inside ``initialize``; a trainer connects to every server. Without the env
contract the runtime runs *standalone*: one partition, no servers, everything in process —
handy for debugging a training script on one machine with the same code.
"""

from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from partitioner.format import load_array, read_config
from partitioner.graph import etype_key, parse_etype_key
from partitioner.loader import check_out_edges, load_partition
from partitioner.parallel import retain_freed_memory
from partitioner.partition_book import RangePartitionBook

from . import kernels
from .client import Request, ServerPool
from .env import RuntimeEnv
from .errors import DistError
from .ip_config import read_ip_config
from .shm import ShmArena

NID = "_ID"  # DGL's key for global node ids in block data
EID = "_ID"


@dataclass
class RuntimeContext:
    """What ``initialize`` set up for this process."""

    env: RuntimeEnv | None
    pool: ServerPool | None = None
    graphs: list[Any] = field(default_factory=list)

    @property
    def standalone(self) -> bool:
        return self.env is None


_context: RuntimeContext | None = None


def initialize(ip_config: str | None = None, **_dgl_compat: Any) -> None:
    """Start this process's part of the job (DGL's ``dgl.distributed.initialize``).

    Server processes load their partition and serve until the job ends, then exit here.
    Trainers connect to every server listed in ``ip_config`` (default: the env contract's).
    Without the launcher's environment, runs standalone (no servers).
    """
    global _context
    env = RuntimeEnv.from_environ()
    if env is None or env.role != "server":
        from . import kernels

        kernels.warm_up()  # at start-up, not in the first sampling step
        # Each step's features and activations (tens of MB) reuse freed heap instead of
        # being page-faulted in again (see retain_freed_memory for the figures).
        retain_freed_memory(1 << 30, large=True)
    if env is None:
        _context = RuntimeContext(env=None)
        _standalone_torch_env()
        return
    if env.role == "server":
        from .server import run_server

        run_server(env)
        sys.exit(0)
    machines = read_ip_config(ip_config or env.ip_config)
    pool = ServerPool(machines, env.num_servers, env.token, env.timeout,
                      client_name=f"{env.role}-{os.getpid()}")
    pool.connect()
    _context = RuntimeContext(env=env, pool=pool)
    atexit.register(exit_client)


def _standalone_torch_env() -> None:
    """Let ``init_process_group`` work unchanged in standalone mode: a world of one."""
    import socket

    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")


def exit_client() -> None:
    """Close this process's connections (servers exit once every client has gone)."""
    global _context
    if _context is not None and _context.pool is not None:
        _context.pool.close()
    _context = None


def get_context() -> RuntimeContext:
    """The current context; standalone if ``initialize`` was not called."""
    global _context
    if _context is None:
        _context = RuntimeContext(env=None)
    return _context


# Remote pulls come back in pieces of this size, so the owner's gather of one piece overlaps
# the transfer of the previous one and the copy here overlaps the next (10k x 128 float32 from
# the other machine: 5.2 ms as one message, 3.6 ms in 1 MB pieces; 256 KB and 2 MB were slower).
PULL_PIECE_BYTES = 1 << 20


def _scatter_into(out: np.ndarray, sel):
    """Sink for a streamed pull: rows ``row0...`` of the reply go to ``out[sel][row0...]``."""
    if isinstance(sel, slice):  # every requested row came from this machine, in order
        def sink(row0: int, rows: np.ndarray) -> None:
            out[row0:row0 + len(rows)] = rows
    else:
        def sink(row0: int, rows: np.ndarray) -> None:
            kernels.copy_rows(rows, out, dst_ids=sel[row0:row0 + len(rows)])
    return sink


class _DataView:
    """``g.ndata`` / ``g.nodes[t].data``: named DistTensors of one node or edge type."""

    def __init__(self, graph: DistGraph, policy: str) -> None:
        self._graph = graph
        self._policy = policy

    def _names(self) -> dict[str, str]:
        kind, typ = self._policy.split(":", 1)
        prefix = typ + "/"
        return {full[len(prefix):]: full for full, pol in self._graph._policies.items()
                if pol == self._policy and full.startswith(prefix)}

    def __getitem__(self, name: str):
        from .dist_tensor import DistTensor

        full = self._names().get(name)
        if full is None:
            raise KeyError(f"{self._policy}: no data named {name!r}; have {sorted(self._names())}")
        return DistTensor._existing(self._graph, full, self._policy)

    def __setitem__(self, name: str, tensor) -> None:
        full = f"{self._policy.split(':', 1)[1]}/{name}"
        if getattr(tensor, "name", None) != full:
            raise DistError(
                f"assign a DistTensor created with name={full!r} and part_policy={self._policy!r}"
            )

    def __contains__(self, name: str) -> bool:
        return name in self._names()

    def keys(self):
        return self._names().keys()

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


@dataclass
class _TypeData:
    data: _DataView


class _TypeView:
    """``g.nodes[t]`` / ``g.edges[t]``: the data of one type, as ``.data``."""

    def __init__(self, graph: DistGraph, kind: str) -> None:
        self._graph = graph
        self._kind = kind

    def __getitem__(self, typ) -> _TypeData:
        if self._kind == "edge":
            typ = self._graph._canonical(typ)
        return _TypeData(_DataView(self._graph, f"{self._kind}:{typ}"))


class DistGraph:
    """The distributed graph (DGL's ``DistGraph``): structure and data spread over machines.

    Reads the partition config (JSON only; shards stay on their hosts) for the partition book
    and the feature schema. Rows owned by this machine are read from shared memory; other rows
    come from their machine's servers, one request per machine per call.
    """

    def __init__(self, graph_name: str, part_config: str | None = None) -> None:
        ctx = get_context()
        path = part_config or (ctx.env.part_config if ctx.env else None)
        if path is None:
            raise DistError(
                f"DistGraph({graph_name!r}): no part_config given and no launcher environment",
                hint="pass part_config='parts/NAME.json' to run standalone",
            )
        self.config = read_config(path)
        if self.config["graph_name"] != graph_name:
            raise DistError(
                f"DistGraph({graph_name!r}): {self.config['_path']} holds graph "
                f"{self.config['graph_name']!r}"
            )
        self.graph_name = graph_name
        self._ctx = ctx
        self._policies: dict[str, str] = {}
        self._local: dict[str, np.ndarray] = {}
        schema = self.config.get("feature_schema", {})
        for key in schema.get("node", {}):
            self._policies[key] = f"node:{key.split('/', 1)[0]}"
        for key in schema.get("edge", {}):
            self._policies[key] = f"edge:{key.rsplit('/', 1)[0]}"
        if ctx.standalone:
            if self.config["num_parts"] != 1:
                raise DistError(
                    f"standalone mode needs a 1-part partition; {self.config['_path']} has "
                    f"{self.config['num_parts']}",
                    hint="run through 'dglctl launch', or partition with --num-parts 1",
                )
            self.machine_id = 0
            self._part = load_partition(self.config, 0)
            feats = {**self._part.node_feats(), **self._part.edge_feats()}
            # Copies: standalone writes must not touch the partition files.
            self._local = {k: np.array(v) for k, v in feats.items()}
            for ntype, rel in self.config["orig_nids"].items():
                self._local[f"orig:{ntype}"] = np.asarray(load_array(self.config, rel))
            self._arena = None
            self._csc = {e: tuple(np.asarray(a) for a in self._part.csc(e))
                         for e in self.config["etypes"]}
        else:
            assert ctx.env is not None
            self.machine_id = ctx.env.machine_id
            self._part = None
            self._arena = ShmArena(ctx.env.job_id, self.machine_id)
            manifest = self._arena.wait_manifest(ctx.env.timeout)
            for name in manifest["tensors"]:
                self._local[name] = self._arena.attach(name)
            from .server import graph_tensor

            self._csc = {
                e: (self._arena.attach(graph_tensor(e, "indptr"), writable=False),
                    self._arena.attach(graph_tensor(e, "indices"), writable=False))
                for e in self.config["etypes"]
            }
        self._csr: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # on first use
        self._book = RangePartitionBook(self.config, self.machine_id)
        ctx.graphs.append(self)
        self.ndata = _DataView(self, f"node:{self.ntypes[0]}") if len(self.ntypes) == 1 else None
        self.edata = (_DataView(self, f"edge:{etype_key(self.canonical_etypes[0])}")
                      if len(self.canonical_etypes) == 1 else None)
        self.nodes = _TypeView(self, "node")
        self.edges = _TypeView(self, "edge")

    # --- structure -----------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        return sorted(self.config["ntypes"], key=self.config["ntypes"].get)

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        keys = sorted(self.config["etypes"], key=self.config["etypes"].get)
        return [parse_etype_key(k) for k in keys]

    @property
    def etypes(self) -> list[str]:
        return [c[1] for c in self.canonical_etypes]

    def _canonical(self, etype) -> str:
        return self._book._etype_name(etype) or etype_key(self.canonical_etypes[0])

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
        return self._part

    def rank(self) -> int:
        """This trainer's rank among all trainers."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return int(os.environ.get("RANK", 0))

    def barrier(self) -> None:
        """Wait until every trainer of the job has reached this call."""
        self._barrier_count = getattr(self, "_barrier_count", 0) + 1
        ctx = self._ctx
        if ctx.standalone:
            return
        assert ctx.env is not None and ctx.pool is not None
        total = len(ctx.pool.machines) * ctx.env.num_trainers
        ctx.pool.call_many(
            [Request(0, 0, {"op": "barrier", "name": f"{self.graph_name}:{self._barrier_count}",
                            "count": total}, [])],
            max_wait=float(os.environ.get("DGLCTL_BARRIER_TIMEOUT", 600)),
        )

    # --- requests split by owner ---------------------------------------------------------
    def _by_owner(self, ids: np.ndarray, rmap, tname: str):
        """Group per-type ``ids`` by owner machine: yields (machine, positions, local rows)."""
        t = rmap.type_index(tname)
        if len(ids):
            lo, hi = int(ids.min()), int(ids.max())
            total = int(rmap.typed_start[rmap.num_parts, t])
            if lo < 0 or hi >= total:
                raise DistError(f"{tname!r} id {lo if lo < 0 else hi} is outside [0, {total})")
            # Fast path (the common local-rows case): every id inside one part's range.
            m = int(np.searchsorted(rmap.typed_start[1:, t], lo, side="right"))
            if m < rmap.num_parts and hi < rmap.typed_start[m + 1, t]:
                yield m, slice(None), ids - rmap.typed_start[m, t]
                return
        owner = np.searchsorted(rmap.typed_start[1:, t], ids, side="right")
        local = ids - rmap.typed_start[owner, t]
        order = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[order], np.arange(rmap.num_parts + 1))
        for m in range(rmap.num_parts):
            if bounds[m] < bounds[m + 1]:
                sel = order[bounds[m]:bounds[m + 1]]
                yield m, sel, local[sel]

    def _rmap(self, policy: str):
        kind, typ = policy.split(":", 1)
        return (self._book.nodes, typ) if kind == "node" else (self._book.edges, typ)

    def pull(self, name: str, policy: str, ids: np.ndarray, row_shape, dtype) -> np.ndarray:
        """Rows ``ids`` (per-type ids) of tensor ``name``: local ones from shared memory."""
        ids = np.asarray(ids, dtype=np.int64)
        rmap, typ = self._rmap(policy)
        groups = list(self._by_owner(ids, rmap, typ))
        if len(groups) == 1 and groups[0][0] == self.machine_id:
            return kernels.gather_rows(self._local_tensor(name), groups[0][2])  # all local
        out = np.empty((len(ids), *row_shape), dtype)
        reqs = []
        local_part = None
        for m, sel, local in groups:
            if m == self.machine_id:
                local_part = (sel, local)
                continue
            # (Splitting a big pull into requests spread over servers was measured: no faster.
            # The server streams its reply in pieces instead, copied here as they arrive.)
            pool = self._ctx.pool
            reqs.append(Request(m, pool.pick(m), {"op": "pull", "name": name,
                                                  "stream": PULL_PIECE_BYTES},
                                [local], sink=_scatter_into(out, sel)))
        if reqs:
            replies = self._ctx.pool.send_many(reqs)
            if local_part is not None:  # local rows while the remote ones are in flight
                sel, local = local_part
                kernels.copy_rows(self._local_tensor(name), out, src_ids=local, dst_ids=sel)
            replies.collect()
        elif local_part is not None:
            sel, local = local_part
            kernels.copy_rows(self._local_tensor(name), out, src_ids=local, dst_ids=sel)
        return out

    def push(self, name: str, policy: str, ids: np.ndarray, data: np.ndarray, mode: str) -> None:
        """Write (``set``) or accumulate (``add``) rows ``ids`` of tensor ``name``."""
        ids = np.asarray(ids, dtype=np.int64)
        rmap, typ = self._rmap(policy)
        reqs = []
        for m, sel, local in self._by_owner(ids, rmap, typ):
            rows = data[sel]
            if m == self.machine_id:
                arr = self._local_tensor(name)
                if mode == "add":
                    np.add.at(arr, local, rows)
                else:
                    arr[local] = rows
            else:
                pool = self._ctx.pool
                reqs.append(Request(m, pool.pick(m), {"op": "push", "name": name, "mode": mode},
                                    [local, np.ascontiguousarray(rows)]))
        if reqs:
            self._ctx.pool.call_many(reqs)

    def sparse_update(self, kind: str, weight: str, states: list[str], policy: str,
                      ids: np.ndarray, grads: np.ndarray, params: dict) -> None:
        """Send row gradients to the machines owning the rows; each applies the update.

        Every update to a machine's rows is applied by that machine's main server, local rows
        included: a row's optimizer step reads and writes its weight and state, so two
        processes applying steps to the same rows at once (two trainers of a host, or a
        trainer and a backup server) could lose one of them. One applier per machine keeps
        every step. Standalone mode has one process and applies them in place.
        """
        from .sparse_update import apply_update

        rmap, typ = self._rmap(policy)
        ids = np.asarray(ids, np.int64)
        if self._ctx.standalone:
            apply_update(kind, self._local_tensor(weight),
                         [self._local_tensor(n) for n in states], ids, grads, params)
            return
        reqs = [
            Request(m, 0, {"op": "sparse_update", "kind": kind, "weight": weight,
                           "states": states, "params": params},
                    [local, np.ascontiguousarray(grads[sel])])
            for m, sel, local in self._by_owner(ids, rmap, typ)
        ]
        if reqs:
            self._ctx.pool.call_many(reqs)

    def _local_tensor(self, name: str) -> np.ndarray:
        arr = self._local.get(name)
        if arr is None:
            if self._arena is None:
                raise DistError(f"no tensor named {name!r}")
            arr = self._local[name] = self._arena.attach(name)
        return arr

    # --- degrees and edges -----------------------------------------------------------------
    def _out_csr(self, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This machine's out-CSR of edge type ``key``: (indptr over its owned nodes of the
        source type, homogeneous destination ids, homogeneous edge ids)."""
        csr = self._csr.get(key)
        if csr is None:
            check_out_edges(self.config)  # written with --no-out-edges: say so, name the fix
            if self._part is not None:
                csr = tuple(np.asarray(a) for a in self._part.csr(key))
            else:
                from .server import OUT_CSR, graph_tensor

                assert self._arena is not None
                csr = tuple(self._arena.attach(graph_tensor(key, w), writable=False)
                            for w in OUT_CSR)
            self._csr[key] = csr  # type: ignore[assignment]
        return csr  # type: ignore[return-value]

    def in_degrees(self, v=None, etype=None):
        """In-degree of nodes ``v`` (homogeneous/per-type ids of the edge type's destination)."""
        key = self._canonical(etype)
        return self._degrees(v, key, parse_etype_key(key)[2], "in_degrees",
                             lambda: self._csc[key][0])

    def out_degrees(self, u=None, etype=None):
        """Out-degree of nodes ``u`` (homogeneous/per-type ids of the edge type's source).

        Needs a partition written with out-edges (the default; not ``--no-out-edges``).
        """
        key = self._canonical(etype)
        check_out_edges(self.config)
        return self._degrees(u, key, parse_etype_key(key)[0], "out_degrees",
                             lambda: self._out_csr(key)[0])

    def _degrees(self, nodes, key: str, ntype: str, op: str, local_indptr):
        """Degrees of ``nodes`` of ``ntype`` (all when None): local ones from
        ``local_indptr()``, the others by ``op`` to their machines, all sent at once."""
        import torch

        if nodes is None:
            nodes = np.arange(self.num_nodes(ntype))
        ids = np.asarray(nodes, dtype=np.int64).reshape(-1)
        out = np.empty(len(ids), np.int64)
        reqs, slots = [], []
        for m, sel, local in self._by_owner(ids, self._book.nodes, ntype):
            if m == self.machine_id:
                indptr = local_indptr()
                out[sel] = indptr[local + 1] - indptr[local]
            else:
                pool = self._ctx.pool
                reqs.append(Request(m, pool.pick(m), {"op": op, "etype": key}, [local]))
                slots.append(sel)
        if reqs:
            for sel, (_, arrays) in zip(slots, self._ctx.pool.call_many(reqs), strict=True):
                out[sel] = arrays[0]
        return torch.from_numpy(out)

    def find_edges(self, edges, etype=None):
        """``(src, dst)`` homogeneous node ids of edge ids ``edges`` of ``etype``."""
        import torch

        key = self._canonical(etype)
        ids = np.asarray(edges, dtype=np.int64).reshape(-1)
        src = np.empty(len(ids), np.int64)
        dst = np.empty(len(ids), np.int64)
        reqs, slots = [], []
        for m, sel, local in self._by_owner(ids, self._book.edges, key):
            if m == self.machine_id:
                indptr, indices = self._csc[key]
                src[sel] = indices[local]
                dst_type = parse_etype_key(key)[2]
                d_local = np.searchsorted(indptr, local, side="right") - 1
                t = self._book.nodes.type_index(dst_type)
                dst[sel] = self._book.map_to_homo_nid(
                    d_local + self._book.nodes.typed_start[m, t], dst_type)
            else:
                pool = self._ctx.pool
                reqs.append(Request(m, pool.pick(m), {"op": "find_edges", "etype": key}, [local]))
                slots.append(sel)
        if reqs:
            for sel, (_, arrays) in zip(slots, self._ctx.pool.call_many(reqs), strict=True):
                src[sel], dst[sel] = arrays
        return torch.from_numpy(src), torch.from_numpy(dst)
