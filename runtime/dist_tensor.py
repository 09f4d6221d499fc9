"""``DistTensor``: a tensor whose rows live with the machine that owns each node or edge, and
DGL's partition policies (``PartitionPolicy``, ``NodePartitionPolicy``, ``EdgePartitionPolicy``).

As DGL's: a tensor is known by its policy's type and its name (``"TYPE/name"`` here, DGL's
``"node~TYPE:name"``); constructing one with a name that exists refers to the existing rows
(shape and dtype must match); a non-persistent tensor is freed when this process's last
handle of it goes, a persistent one lives as long as the job.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from partitioner.graph import etype_key

from . import batch_reads
from .context import get_context
from .errors import DistError
from .feature_cache import CacheStats, PulledRows
from .tensor_store import TensorMeta, TensorStore
from .view import PartitionPolicy, _as_ids, policy_key

_anonymous = itertools.count()


def _np_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, torch.dtype):
        return torch.empty(0, dtype=dtype).numpy().dtype
    return np.dtype(dtype)


def _current_store() -> TensorStore:
    store: TensorStore = get_context().current_graph().store
    return store


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
        _store: TensorStore | None = None,
        _key: str | None = None,
    ) -> None:
        store = self._store = _store or _current_store()
        self.shape = tuple(int(s) for s in shape)
        self._np_dtype = _np_dtype(dtype)
        self.dtype = torch.from_numpy(np.empty(0, self._np_dtype)).dtype
        self._row_shape = self.shape[1:]
        self._policy = policy_key(part_policy) if part_policy is not None else \
            self._infer_policy()
        kind, typ = self._policy.split(":", 1)
        size = store.book.num_nodes(typ) if kind == "node" else store.book.num_edges(typ)
        if self.shape[0] != size:
            raise DistError(f"DistTensor {name or ''}{self.shape}: shape[0] is {self.shape[0]} "
                            f"but {self._policy} has {size} rows")
        if _key is not None:  # a tensor the graph knows (features, or one named before)
            self._key, self.tensor_name = _key, _key.split("/", 1)[-1]
            meta = store.meta(_key)
            assert meta is not None, f"{_key} is a tensor the store knows"
            self.persistent = meta.persistent
        else:
            if name is None:
                if persistent:
                    raise DistError("an anonymous DistTensor cannot be persistent; name it")
                name = f"anonymous-trainer-{next(_anonymous)}"
            self._key, self.tensor_name, self.persistent = f"{typ}/{name}", name, persistent
            self._open(init_func)
        self._life = None if self.persistent else store.life_of(self._key)

    def _infer_policy(self) -> str:
        book = self._store.book
        found = [f"node:{t}" for t in book.ntypes if book.num_nodes(t) == self.shape[0]]
        found += [f"edge:{etype_key(c)}" for c in book.canonical_etypes
                  if book.num_edges(c) == self.shape[0]]
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
        meta = TensorMeta(self._policy, self._row_shape, self._np_dtype, self.persistent)
        have = self._store.meta(self._key)
        if have is None:
            self._store.create(self._key, meta, init_func)
        elif (have.policy, have.row_shape, have.dtype) != (meta.policy, meta.row_shape,
                                                          meta.dtype):
            raise DistError(
                f"DistTensor {self.tensor_name!r} exists with shape "
                f"{(self.shape[0], *have.row_shape)} and dtype {have.dtype} ({have.policy}), "
                f"not {self.shape} and {self._np_dtype} ({meta.policy})",
                hint="use another name, or drop every handle of the old one first (a "
                     "persistent tensor lives as long as the job)")

    @classmethod
    def existing(cls, store: TensorStore, key: str) -> DistTensor:
        """A handle of tensor ``key``, which ``store`` knows (a feature, or one named
        before)."""
        meta = store.meta(key)
        if meta is None:
            raise DistError(f"no tensor {key!r} in this graph")
        kind, typ = meta.policy.split(":", 1)
        rows = store.book.num_nodes(typ) if kind == "node" else store.book.num_edges(typ)
        return cls((rows, *meta.row_shape), meta.dtype, None, None, meta.policy, _store=store,
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
        return PartitionPolicy(self._policy, self._store.book)

    @property
    def store(self) -> TensorStore:
        """The store that holds its rows (its graph's): optimizers step through it."""
        return self._store

    @property
    def local_partition(self) -> torch.Tensor:
        """This machine's rows (shared memory in a job: writes are seen by every process)."""
        return torch.from_numpy(self._store.local_rows(self._key))

    def __len__(self) -> int:
        return self.shape[0]

    # --- rows ----------------------------------------------------------------------------
    def __getitem__(self, ids) -> torch.Tensor:
        ahead = batch_reads.take(self, ids)  # pulled by the loader while the last step ran
        if ahead is not None:
            return ahead
        if isinstance(ids, torch.Tensor) and ids.device.type != "cpu":
            # A batch on a GPU: its rows come back beside its ids (DGL gives CPU rows), the
            # ones found in copies kept there put in on the device.
            got = self.read_parts(ids.cpu())
            return got.hits.place(torch.from_numpy(got.host).to(ids.device))
        return torch.from_numpy(self.read_rows(ids))

    def read_rows(self, ids: Any) -> np.ndarray:
        """Rows ``ids`` pulled now (``t[ids]`` may take rows a loader pulled ahead)."""
        ids = _as_ids(ids, self.shape[0])
        return self._store.pull(self._key, self._policy, ids, self._row_shape, self._np_dtype)

    def read_parts(self, ids: Any) -> PulledRows:
        """Rows ``ids`` pulled now, but those found in copies kept on the trainer's device
        (``runtime.feature_cache``): put in by ``hits.place`` once the rows are there."""
        ids = _as_ids(ids, self.shape[0])
        return self._store.pull_parts(self._key, self._policy, ids, self._row_shape,
                                      self._np_dtype)

    def __setitem__(self, ids, value) -> None:
        ids = _as_ids(ids, self.shape[0])
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        data = np.broadcast_to(data, (len(ids), *self._row_shape))
        self._store.push(self._key, self._policy, ids, data, "set")

    def add_(self, ids, value) -> None:
        """Accumulate ``value`` into rows ``ids`` (duplicates add up)."""
        ids = _as_ids(ids, self.shape[0])
        data = torch.as_tensor(value).numpy().astype(self._np_dtype, copy=False)
        self._store.push(self._key, self._policy, ids, data, "add")

    def cache_stats(self) -> CacheStats | None:
        """How many of the other machines' rows this process asked for and found in the
        copies it keeps (``feature_cache_gb``; None: it keeps none of this tensor)."""
        return self._store.cache_stats(self._key)

    def count_nonzero(self) -> int:
        """Number of non-zero values in the whole tensor (every machine counts its rows)."""
        return self._store.count_nonzero(self._key)

    # --- element-wise operators (DGL has ``|``): a new anonymous DistTensor --------------
    def _binary(self, other: Any, op: Callable) -> DistTensor:
        """``op`` row-wise on every machine's rows (each trainer computes its own machine's,
        from shared memory), as DGL's ``union``."""
        store = self._store
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
                         part_policy=self._policy, _store=store)
        b = store.local_rows(other._key) if isinstance(other, DistTensor) else other
        store.local_rows(out._key)[...] = op(store.local_rows(self._key), b)
        store.barrier()  # every machine's rows are written before anyone reads them
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

