"""``DistTensor``: a tensor whose rows live with the machine that owns each node or edge."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .context import get_context
from .errors import DistError
from .routing import route
from .rpc import messages as msg

if TYPE_CHECKING:
    from .dist_graph import DistGraph

_auto_names = itertools.count()


@dataclass(frozen=True)
class TensorMeta:
    """What a graph knows of one of its named tensors: partition policy, row shape, dtype."""

    policy: str
    row_shape: tuple[int, ...]
    dtype: np.dtype


def _np_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, torch.dtype):
        return torch.empty(0, dtype=dtype).numpy().dtype
    return np.dtype(dtype)


def _as_ids(ids: Any) -> np.ndarray:
    """Ids as a 1-D int64 numpy array, without a copy when they already are one."""
    if isinstance(ids, np.ndarray):
        return ids.astype(np.int64, copy=False).reshape(-1)
    if isinstance(ids, torch.Tensor):
        return ids.numpy().astype(np.int64, copy=False).reshape(-1)
    return np.asarray(ids, dtype=np.int64).reshape(-1)


def _current_graph() -> DistGraph:
    return get_context().current_graph()


@dataclass(frozen=True)
class _Machine:
    """A request that concerns a whole machine (see ``routing.route``)."""

    machine: int


class DistTensor:
    """DGL's ``DistTensor(shape, dtype, name, init_func, part_policy, persistent)``.

    ``part_policy`` is ``"node:TYPE"`` or ``"edge:SRC:ETYPE:DST"``; when omitted it is inferred
    from ``shape[0]`` (the node or edge count of the only type). Every trainer constructs the
    same tensor (same name); it is created once per machine, ``init_func(shape, dtype)`` fills
    each machine's rows, and indexing reads or writes rows by id.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        name: str | None = None,
        init_func: Callable[[tuple[int, ...], Any], torch.Tensor] | None = None,
        part_policy: str | None = None,
        persistent: bool = False,
        *,
        _graph: DistGraph | None = None,
        _create: bool = True,
    ) -> None:
        self._graph = _graph or _current_graph()
        self.shape = tuple(int(s) for s in shape)
        self._np_dtype = _np_dtype(dtype)
        self.dtype = torch.from_numpy(np.empty(0, self._np_dtype)).dtype
        self.part_policy = part_policy or self._infer_policy()
        self.name = name or f"tensor{next(_auto_names)}"
        self.persistent = persistent
        if _create:
            self._create(init_func)

    @classmethod
    def _existing(cls, graph: DistGraph, name: str, meta: TensorMeta) -> DistTensor:
        kind, typ = meta.policy.split(":", 1)
        rows = graph.num_nodes(typ) if kind == "node" else graph.num_edges(typ)
        return cls((rows, *meta.row_shape), meta.dtype, name, None, meta.policy, True,
                   _graph=graph, _create=False)

    def _infer_policy(self) -> str:
        g = self._graph
        if len(g.ntypes) == 1 and self.shape[0] == g.num_nodes():
            return f"node:{g.ntypes[0]}"
        if len(g.canonical_etypes) == 1 and self.shape[0] == g.num_edges():
            return "edge:" + ":".join(g.canonical_etypes[0])
        raise DistError(
            f"DistTensor {self.shape}: cannot infer part_policy; pass part_policy='node:TYPE' "
            "or 'edge:SRC:ETYPE:DST'"
        )

    def _rows_on(self, machine: int) -> int:
        rmap, typ = self._graph._rmap(self.part_policy)
        t = rmap.type_index(typ)
        return int(rmap.typed_start[machine + 1, t] - rmap.typed_start[machine, t])

    def _create(self, init_func) -> None:
        """Collective: every trainer calls it; each machine's rows are made and filled once."""
        g = self._graph
        kind, typ = self.part_policy.split(":", 1)
        expected = g.num_nodes(typ) if kind == "node" else g.num_edges(typ)
        if self.shape[0] != expected:
            raise DistError(f"DistTensor {self.name!r}: shape[0]={self.shape[0]} but "
                            f"{self.part_policy} has {expected} rows")
        g._register(self)
        ctx = g._ctx
        if ctx.standalone:
            g.local.tensors[self.name] = self._init_rows(init_func, 0)
            return
        # Idempotent create on every machine's main server; exactly one caller per machine
        # hears "created" and fills that machine's rows (init_func runs in the trainer: no
        # code crosses the wire). The barrier keeps everyone from reading before that.
        created: list[int] = []
        rmap, _ = g._rmap(self.part_policy)
        route(ctx.pool, g.machine_id, [_Machine(m) for m in range(rmap.num_parts)],
              lambda it: msg.Create(self.name, [self._rows_on(it.machine), *self.shape[1:]],
                                    self._np_dtype.str, self.part_policy, exist_ok=True),
              place=lambda it, reply: created.append(it.machine) if reply.created else None,
              main_server=True)
        if init_func is not None:
            t = rmap.type_index(typ)
            for m in created:
                ids = np.arange(rmap.typed_start[m, t], rmap.typed_start[m + 1, t])
                g.push(self.name, self.part_policy, ids, self._init_rows(init_func, m), "set")
        g.barrier()

    def _init_rows(self, init_func, machine: int) -> np.ndarray:
        rows = (self._rows_on(machine), *self.shape[1:])
        init = (init_func(rows, self.dtype) if init_func is not None
                else torch.zeros(rows, dtype=self.dtype))
        return np.ascontiguousarray(torch.as_tensor(init).numpy().astype(self._np_dtype))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids) -> torch.Tensor:
        ids = _as_ids(ids)
        return torch.from_numpy(
            self._graph.pull(self.name, self.part_policy, ids, self.shape[1:], self._np_dtype))

    def __setitem__(self, ids, value) -> None:
        ids = _as_ids(ids)
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        data = np.broadcast_to(data, (len(ids), *self.shape[1:]))
        self._graph.push(self.name, self.part_policy, ids, data, "set")

    def add_(self, ids, value) -> None:
        """Accumulate ``value`` into rows ``ids`` (duplicates add up); used by sparse optimizers."""
        ids = _as_ids(ids)
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        self._graph.push(self.name, self.part_policy, ids, data, "add")

    def __repr__(self) -> str:
        return f"DistTensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, " \
               f"part_policy={self.part_policy!r})"
