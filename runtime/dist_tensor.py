"""``DistTensor``: a tensor whose rows live with the machine that owns each node or edge."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .client import Request
from .dist_graph import DistGraph, get_context
from .errors import DistError

_auto_names = itertools.count()


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
    graphs = get_context().graphs
    if not graphs:
        raise DistError("create a DistGraph before any DistTensor (it supplies the partition book)")
    return graphs[-1]


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
    def _existing(cls, graph: DistGraph, name: str, policy: str) -> DistTensor:
        kind, typ = policy.split(":", 1)
        schema = graph.config["feature_schema"][kind][name]
        rows = graph.num_nodes(typ) if kind == "node" else graph.num_edges(typ)
        return cls((rows, *schema["shape"]), np.dtype(schema["dtype"]), name, None, policy,
                   True, _graph=graph, _create=False)

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
        g._policies[self.name] = self.part_policy
        ctx = g._ctx
        if ctx.standalone:
            g._local[self.name] = self._init_rows(init_func, 0)
            return
        # Idempotent create on every machine's main server; exactly one caller per machine
        # hears "created" and fills that machine's rows (init_func runs in the trainer: no
        # code crosses the wire). The barrier keeps everyone from reading before that.
        reqs = [
            Request(m, 0, {"op": "create", "name": self.name,
                           "shape": [self._rows_on(m), *self.shape[1:]],
                           "dtype": self._np_dtype.str, "policy": self.part_policy,
                           "exist_ok": True}, [])
            for m in range(len(ctx.pool.machines))
        ]
        for m, (header, _) in enumerate(ctx.pool.call_many(reqs)):
            if header.get("created") and init_func is not None:
                rmap, _ = g._rmap(self.part_policy)
                t = rmap.type_index(typ)
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
