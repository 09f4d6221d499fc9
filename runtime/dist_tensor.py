"""``DistTensor``: a tensor whose rows live with the machine that owns each node or edge, and
DGL's partition policies (``PartitionPolicy``, ``NodePartitionPolicy``, ``EdgePartitionPolicy``).

As DGL's: a tensor is known by its policy's type and its name (``"TYPE/name"`` here, DGL's
``"node~TYPE:name"``); constructing one with a name that exists refers to the existing rows
(shape and dtype must match); a non-persistent tensor is freed when this process's last
handle of it goes, a persistent one lives as long as the job.
"""

from __future__ import annotations

import itertools
import logging
import operator
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from partitioner.graph import etype_key

from .context import get_context
from .errors import DistError
from .rpc import messages as msg
from .rpc.client import Request
from .view import PartitionPolicy, _as_ids, policy_key

if TYPE_CHECKING:
    from .dist_graph import DistGraph

_anonymous = itertools.count()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TensorMeta:
    """What a graph knows of one of its named tensors: partition policy, row shape, dtype."""

    policy: str
    row_shape: tuple[int, ...]
    dtype: np.dtype
    persistent: bool = True


def _np_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, torch.dtype):
        return torch.empty(0, dtype=dtype).numpy().dtype
    return np.dtype(dtype)


def _current_graph() -> DistGraph:
    return get_context().current_graph()


@dataclass(frozen=True)
class _Machine:
    """A request that concerns a whole machine (see ``routing.route``)."""

    machine: int


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


def create_rows(g: DistGraph, key: str, meta: TensorMeta, init_func) -> None:
    """Make tensor ``key`` on every machine (collective in a job: every trainer calls it;
    each machine's rows are made and filled once)."""
    flush_frees(g)
    typ = meta.policy.split(":", 1)[1]
    rmap, _ = g._rmap(meta.policy)
    t = rmap.type_index(typ)
    starts = rmap.typed_start[:, t]

    def rows_of(m: int) -> np.ndarray:
        n = (int(starts[m + 1] - starts[m]), *meta.row_shape)
        init = init_func(n, _torch_dtype(meta.dtype)) if init_func is not None else None
        if init is None:
            return np.zeros(n, meta.dtype)
        return np.ascontiguousarray(torch.as_tensor(init).numpy().astype(meta.dtype))

    if g._ctx.standalone:
        g.local.tensors[key] = rows_of(0)
        g._tensors[key] = meta
        return
    # Idempotent create on every machine's main server; exactly one caller per machine
    # hears "created" and fills that machine's rows (init_func runs in the trainer: no
    # code crosses the wire). The first barrier lets every trainer's frees (a name being
    # made again) arrive first, as DGL's; the last keeps everyone from reading too soon.
    g.barrier()
    created: list[int] = []
    g._route([_Machine(m) for m in range(rmap.num_parts)],
             lambda it: msg.Create(key, [int(starts[it.machine + 1] - starts[it.machine]),
                                         *meta.row_shape], meta.dtype.str, meta.policy,
                                   exist_ok=True),
             place=lambda it, reply: created.append(it.machine) if reply.created else None,
             main_server=True)
    g._tensors[key] = meta
    if init_func is not None:
        for m in created:
            g.push(key, meta.policy, np.arange(starts[m], starts[m + 1]), rows_of(m), "set")
    g.barrier()


def life_of(g: DistGraph, key: str) -> _Life:
    """The object every handle of non-persistent tensor ``key`` shares (see ``free_rows``)."""
    life = g._lives.get(key)
    if life is None:
        life = g._lives[key] = _Life(g, key)
    return life


def free_rows(g: DistGraph, key: str) -> None:
    """The last handle of non-persistent tensor ``key`` in this process has gone: free it
    (in a job, every machine frees its rows once every trainer has let go)."""
    if g._tensors.pop(key, None) is None:
        return
    g.local.tensors.pop(key, None)
    if not g._ctx.standalone:
        g._unfreed.append(key)
        if not g._in_rpc:  # never inside another request's wait (a gc run there)
            flush_frees(g)


def flush_frees(g: DistGraph) -> None:
    """Send the frees that waited for the end of a request (a Delete to every server)."""
    while g._unfreed and g._ctx.pool is not None:
        key = g._unfreed.pop()
        pool = g._ctx.pool
        reqs = [Request(m, k, msg.Delete(key)) for m in range(len(pool.machines))
                for k in range(pool.num_servers)]
        g._in_rpc += 1
        try:
            pool.call_many(reqs)
        except Exception as e:  # noqa: BLE001 - a free runs from a finalizer: never raise
            # (the connections are closed after exit_client, or a server has gone: the job's
            # end removes its shared memory anyway).
            log.warning("could not free tensor %r: %s", key, e)
        finally:
            g._in_rpc -= 1


def count_nonzero(g: DistGraph, key: str) -> int:
    """Non-zero values of tensor ``key``: this machine's counted here, the others' by
    their servers."""
    shares = [_Machine(m) for m in range(g._book.num_partitions())]
    counts: list[int] = []
    g._route(shares, lambda it: msg.CountNonzero(key),
             lambda it: msg.CountNonzeroReply(int(np.count_nonzero(g.local.tensor(key)))),
             lambda it, reply: counts.append(int(reply.count)))
    return sum(counts)


class _Life:
    """Shared by every handle of one non-persistent tensor in this process: when the last
    handle goes, the graph frees the tensor (DGL's ``DistTensor.__del__``)."""

    def __init__(self, graph: DistGraph, key: str) -> None:
        f = weakref.finalize(self, _release, weakref.ref(graph), key)
        f.atexit = False


def _release(graph_ref: weakref.ref, key: str) -> None:
    graph = graph_ref()
    if graph is not None:
        free_rows(graph, key)


class DistTensor:
    """DGL's ``DistTensor(shape, dtype, name, init_func, part_policy, persistent)``.

    ``part_policy`` is a ``PartitionPolicy`` or its name; when omitted it is inferred from
    ``shape[0]`` (exactly one node or edge type must have that many rows). Every trainer
    constructs the same tensor (same name, or the same order of anonymous ones); it is
    created once per machine, ``init_func(shape, dtype)`` fills each machine's rows, and
    indexing reads or writes rows by per-type id.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        name: str | None = None,
        init_func: Callable[[tuple[int, ...], Any], torch.Tensor] | None = None,
        part_policy: Any = None,
        persistent: bool = False,
        is_gdata: bool = True,  # noqa: ARG002 - DGL's; every tensor here is graph data
        attach: bool = True,  # noqa: ARG002 - DGL's group ids: one group per job here
        *,
        _graph: DistGraph | None = None,
        _key: str | None = None,
    ) -> None:
        g = self._graph = _graph or _current_graph()
        self.shape = tuple(int(s) for s in shape)
        self._np_dtype = _np_dtype(dtype)
        self.dtype = torch.from_numpy(np.empty(0, self._np_dtype)).dtype
        self._row_shape = self.shape[1:]
        self._policy = policy_key(part_policy) if part_policy is not None else \
            self._infer_policy()
        kind, typ = self._policy.split(":", 1)
        size = g.num_nodes(typ) if kind == "node" else g.num_edges(typ)
        if self.shape[0] != size:
            raise DistError(f"DistTensor {name or ''}{self.shape}: shape[0] is {self.shape[0]} "
                            f"but {self._policy} has {size} rows")
        if _key is not None:  # a tensor the graph knows (features, or one named before)
            self._key, self.tensor_name = _key, _key.split("/", 1)[-1]
            self.persistent = g._tensors[_key].persistent
        else:
            if name is None:
                if persistent:
                    raise DistError("an anonymous DistTensor cannot be persistent; name it")
                name = f"anonymous-trainer-{next(_anonymous)}"
            self._key, self.tensor_name, self.persistent = f"{typ}/{name}", name, persistent
            self._open(init_func)
        self._life = None if self.persistent else life_of(g, self._key)

    def _infer_policy(self) -> str:
        g = self._graph
        found = [f"node:{t}" for t in g.ntypes if g.num_nodes(t) == self.shape[0]]
        found += [f"edge:{etype_key(c)}" for c in g.canonical_etypes
                  if g.num_edges(c) == self.shape[0]]
        if len(found) != 1:
            why = "several types match" if found else "no node or edge type has that many rows"
            raise DistError(
                f"DistTensor {self.shape}: cannot infer the partition policy from shape[0] "
                f"({why}{': ' + ', '.join(found) if found else ''})",
                hint="pass part_policy= (e.g. PartitionPolicy('node~TYPE', "
                     "g.get_partition_book()) or 'node:TYPE')")
        return found[0]

    def _open(self, init_func) -> None:
        """Refer to the tensor if this process knows the name, else create it (collective)."""
        g = self._graph
        meta = TensorMeta(self._policy, self._row_shape, self._np_dtype, self.persistent)
        have = g._tensors.get(self._key)
        if have is None:
            create_rows(g, self._key, meta, init_func)
        elif (have.policy, have.row_shape, have.dtype) != (meta.policy, meta.row_shape,
                                                          meta.dtype):
            raise DistError(
                f"DistTensor {self.tensor_name!r} exists with shape "
                f"{(self.shape[0], *have.row_shape)} and dtype {have.dtype} ({have.policy}), "
                f"not {self.shape} and {self._np_dtype} ({meta.policy})",
                hint="use another name, or drop every handle of the old one first (a "
                     "persistent tensor lives as long as the job)")

    @classmethod
    def _existing(cls, graph: DistGraph, key: str, meta: TensorMeta) -> DistTensor:
        kind, typ = meta.policy.split(":", 1)
        rows = graph.num_nodes(typ) if kind == "node" else graph.num_edges(typ)
        return cls((rows, *meta.row_shape), meta.dtype, None, None, meta.policy, _graph=graph,
                   _key=key)

    # --- DGL's attributes ----------------------------------------------------------------
    @property
    def name(self) -> str:
        """The tensor's key in the job (``"TYPE/name"``; DGL's ``kvstore_key``)."""
        return self._key

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (``torch.save(t, ...)``, as DGL's example does) as a handle, as DGL's: its
        shape, dtype, name and policy; loading it in a process of the job attaches the rows by
        name. The rows themselves are saved with ``torch.save(t[0:len(t)], ...)``."""
        return _reattach, (self.shape, self.dtype, self.tensor_name, self._policy,
                           self.persistent)

    @property
    def kvstore_key(self) -> str:
        return self._key

    @property
    def part_policy(self) -> PartitionPolicy:
        return PartitionPolicy(self._policy, self._graph.get_partition_book())

    @property
    def local_partition(self) -> torch.Tensor:
        """This machine's rows (shared memory in a job: writes are seen by every process)."""
        return torch.from_numpy(self._graph.local.tensor(self._key))

    def __len__(self) -> int:
        return self.shape[0]

    # --- rows ----------------------------------------------------------------------------
    def __getitem__(self, ids) -> torch.Tensor:
        ids = _as_ids(ids, self.shape[0])
        return torch.from_numpy(
            self._graph.pull(self._key, self._policy, ids, self._row_shape, self._np_dtype))

    def __setitem__(self, ids, value) -> None:
        ids = _as_ids(ids, self.shape[0])
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        data = np.broadcast_to(data, (len(ids), *self._row_shape))
        self._graph.push(self._key, self._policy, ids, data, "set")

    def add_(self, ids, value) -> None:
        """Accumulate ``value`` into rows ``ids`` (duplicates add up)."""
        ids = _as_ids(ids, self.shape[0])
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        self._graph.push(self._key, self._policy, ids, data, "add")

    def count_nonzero(self) -> int:
        """Number of non-zero values in the whole tensor (every machine counts its rows)."""
        return count_nonzero(self._graph, self._key)

    # --- element-wise operators (DGL has ``|``): a new anonymous DistTensor --------------
    def _binary(self, other: Any, op: Callable) -> DistTensor:
        """``op`` row-wise on every machine's rows (each trainer computes its own machine's,
        from shared memory), as DGL's ``union``."""
        g = self._graph
        if isinstance(other, DistTensor):
            if other._policy != self._policy:
                raise DistError(f"{self.tensor_name!r} ({self._policy}) and "
                                f"{other.tensor_name!r} ({other._policy}) have different "
                                "partition policies")
            sample = np.empty((0, *other._row_shape), other._np_dtype)
        else:
            sample = other
        res = op(np.empty((0, *self._row_shape), self._np_dtype), sample)
        out = DistTensor((self.shape[0], *res.shape[1:]), res.dtype,
                         part_policy=self._policy, _graph=g)
        b = g.local.tensor(other._key) if isinstance(other, DistTensor) else other
        g.local.tensor(out._key)[...] = op(g.local.tensor(self._key), b)
        g.barrier()  # every machine's rows are written before anyone reads them
        return out

    def __or__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.or_)

    def __and__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.and_)

    def __xor__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.xor)

    def __eq__(self, other: Any) -> DistTensor:  # type: ignore[override]
        return self._binary(other, operator.eq)

    def __ne__(self, other: Any) -> DistTensor:  # type: ignore[override]
        return self._binary(other, operator.ne)

    def __lt__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.lt)

    def __le__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.le)

    def __gt__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.gt)

    def __ge__(self, other: Any) -> DistTensor:
        return self._binary(other, operator.ge)

    __hash__ = object.__hash__  # handles stay usable as dict keys despite ``==``

    def __repr__(self) -> str:
        return f"DistTensor(name={self.tensor_name!r}, shape={self.shape}, " \
               f"dtype={self.dtype}, part_policy={self._policy!r})"


def _reattach(shape: tuple[int, ...], dtype: Any, name: str, policy: str,
              persistent: bool) -> DistTensor:
    """A pickled DistTensor's handle, attached again by name (see ``DistTensor.__reduce__``)."""
    return DistTensor(shape, dtype, name, part_policy=policy, persistent=persistent)

