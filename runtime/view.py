"""How a graph's data is addressed: ``g.ndata``, ``g.edata``, ``g.nodes[t].data``,
``g.edges[t].data`` (real mappings of key to ``DistTensor`` for one node or edge type, DGL's
``NodeDataView`` / ``EdgeDataView``), DGL's partition policies (which machine owns each row of a
type) and the row ids a ``DistTensor`` accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from partitioner.graph import etype_key, parse_etype_key

from .context import get_context
from .errors import EXIT_USAGE, DistError

NODE_PART_POLICY, EDGE_PART_POLICY, POLICY_DELIMITER = "node", "edge", "~"


class DGLError(DistError):
    """What DGL raises as ``dgl.DGLError`` (an unknown node or edge type, ...)."""


class NonCanonicalEtypeError(DistError, AssertionError):
    """An edge type given to a partition policy that is not in canonical form (a triple
    ``(src, etype, dst)`` or ``"src:etype:dst"``) and names no single edge type of the book.
    DGL's ``EdgePartitionPolicy`` and ``PartitionPolicy`` ``assert`` a canonical type there,
    and DGL's tests catch the ``AssertionError``: this error is one too, and a ``DistError``
    (``message``, ``hint``, ``exit_code``) like the runtime's others. An unknown type in
    canonical form stays a plain ``DistError`` (DGL asserts nothing there)."""

    exit_code = EXIT_USAGE


def _as_ids(ids: Any, length: int | None = None) -> np.ndarray:
    """Row ids as a 1-D int64 numpy array, without a copy when they already are one. Accepts
    what DGL's ``toindex`` does: tensors, arrays, lists, ints, slices (``t[0:10]``); a bool
    array is a mask."""
    if isinstance(ids, np.ndarray):
        if ids.dtype == np.bool_:
            return np.flatnonzero(ids)
        return ids.astype(np.int64, copy=False).reshape(-1)
    if isinstance(ids, torch.Tensor):
        return _as_ids(ids.numpy())
    if isinstance(ids, slice):
        if length is None:
            raise DistError("a slice of rows needs the tensor's length")
        return np.arange(*ids.indices(length), dtype=np.int64)
    return _as_ids(np.asarray(ids))


class PartitionPolicy:
    """DGL's ``PartitionPolicy(policy_str, partition_book)``: which machine owns each row.

    ``policy_str`` is DGL's ``"node~TYPE"`` / ``"edge~SRC:ETYPE:DST"`` (or just ``"node"`` /
    ``"edge"`` on a graph of one type), or this runtime's ``"node:TYPE"`` /
    ``"edge:SRC:ETYPE:DST"``. ``partition_book`` defaults to the current graph's.
    """

    def __init__(self, policy_str: str, partition_book: Any = None) -> None:
        book = partition_book if partition_book is not None else \
            get_context().current_graph().get_partition_book()
        sep = POLICY_DELIMITER if POLICY_DELIMITER in policy_str else ":"
        kind, _, typ = policy_str.partition(sep)
        if kind not in (NODE_PART_POLICY, EDGE_PART_POLICY):
            raise DistError(f"partition policy {policy_str!r} must start with 'node' or 'edge'")
        types = book.ntypes if kind == NODE_PART_POLICY else \
            [etype_key(c) for c in book.canonical_etypes]
        if not typ:
            if len(types) != 1:
                raise DistError(f"partition policy {policy_str!r}: the graph has several "
                                f"{kind} types; name one ({kind}~TYPE), one of {types}")
            typ = types[0]
        if kind == EDGE_PART_POLICY:
            try:
                typ = etype_key(book.to_canonical_etype(typ))
            except ValueError as e:  # the book's message names the types it has
                raise NonCanonicalEtypeError(f"partition policy {policy_str!r}: {e}") from None
        if typ not in types:
            raise DistError(f"partition policy {policy_str!r}: no {kind} type {typ!r}; the "
                            f"graph has {types}")
        self._partition_book = book
        self._kind = kind
        self._type = typ
        self.key = f"{kind}:{typ}"  # the runtime's own name of the policy

    @property
    def policy_str(self) -> str:
        """DGL's name of the policy: ``"node~TYPE"`` or ``"edge~SRC:ETYPE:DST"``."""
        return f"{self._kind}{POLICY_DELIMITER}{self._type}"

    @property
    def type_name(self) -> str | tuple[str, str, str]:
        """The node type, or the canonical edge type (a triple)."""
        return self._type if self.is_node else parse_etype_key(self._type)

    @property
    def is_node(self) -> bool:
        return self._kind == NODE_PART_POLICY

    @property
    def part_id(self) -> int:
        return int(self._partition_book.partid)

    @property
    def partition_book(self) -> Any:
        return self._partition_book

    def _per_type(self, op: str, *args: Any) -> np.ndarray:
        b = self._partition_book
        fn = getattr(b, ("nid2" if self.is_node else "eid2") + op)
        return fn(*args, self._type)

    def to_local(self, id_tensor: Any) -> torch.Tensor:
        """Per-type ids -> their index among this machine's rows."""
        return torch.from_numpy(np.asarray(self._per_type("localnid" if self.is_node else
                                                          "localeid", _as_ids(id_tensor),
                                                          self.part_id)))

    def to_partid(self, id_tensor: Any) -> torch.Tensor:
        """Per-type ids -> the part (machine) that owns each."""
        return torch.from_numpy(np.asarray(self._per_type("partid", _as_ids(id_tensor))))

    def get_part_size(self) -> int:
        """Rows this machine owns."""
        b = self._partition_book
        ids = (b.partid2nids if self.is_node else b.partid2eids)(self.part_id, self._type)
        return len(ids)

    def get_size(self) -> int:
        """Rows of the whole tensor (the type's node or edge count)."""
        b = self._partition_book
        return int(b.num_nodes(self._type) if self.is_node else b.num_edges(self._type))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionPolicy):
            return self.key == other.key
        return isinstance(other, str) and other in (self.key, self.policy_str)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"PartitionPolicy({self.policy_str!r})"


class NodePartitionPolicy(PartitionPolicy):
    """DGL's ``NodePartitionPolicy(partition_book, ntype)``."""

    def __init__(self, partition_book: Any, ntype: str = "_N") -> None:
        super().__init__(NODE_PART_POLICY + POLICY_DELIMITER + ntype, partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    """DGL's ``EdgePartitionPolicy(partition_book, etype)``: ``etype`` is a canonical edge type
    (a triple, or ``"src:etype:dst"``), or an edge type name that names exactly one. Anything
    else raises :class:`NonCanonicalEtypeError` here, where DGL's ``assert`` fires (an
    ``AssertionError``, as DGL's)."""

    def __init__(self, partition_book: Any,
                 etype: str | tuple[str, str, str] = ("_N", "_E", "_N")) -> None:
        if isinstance(etype, tuple) and len(etype) == 3 and all(isinstance(t, str) for t in etype):
            key = etype_key(etype)
        elif isinstance(etype, str):
            key = etype  # resolved (or refused) by PartitionPolicy against the book's types
        else:
            book = partition_book if partition_book is not None else \
                get_context().current_graph().get_partition_book()
            raise NonCanonicalEtypeError(
                f"EdgePartitionPolicy: edge type {etype!r} is not a canonical edge type "
                f"(src, etype, dst); the partition book has {book.canonical_etypes}")
        super().__init__(EDGE_PART_POLICY + POLICY_DELIMITER + key, partition_book)


def policy_key(policy: Any) -> str:
    """The runtime's name (``"node:T"`` / ``"edge:S:E:D"``) of a policy object or string."""
    return policy.key if isinstance(policy, PartitionPolicy) else \
        PartitionPolicy(policy, get_context().current_graph().get_partition_book()).key


class DataView(MutableMapping):
    """The data of one node or edge type (``policy``: ``"node:TYPE"`` or ``"edge:S:E:D"``),
    DGL's: a mapping of key to ``DistTensor``. ``g.ndata["x"] = t`` maps key ``"x"`` to ``t``,
    whatever its name (as DGL's); ``del`` removes the key (the tensor is freed once no handle
    of it remains, unless persistent); an unknown key is a KeyError.
    """

    def __init__(self, data: dict[str, Any], policy: str) -> None:
        self._policy = policy
        self._data = data

    def __getitem__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise KeyError(f"{self._policy}: no data named {name!r}; have "
                           f"{sorted(self._data)}") from None

    def __setitem__(self, name: str, tensor: Any) -> None:
        self._data[name] = tensor

    def __delitem__(self, name: str) -> None:
        if name not in self._data:
            raise KeyError(f"{self._policy}: no data named {name!r}")
        del self._data[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"DataView({self._policy!r}, {sorted(self._data)})"


@dataclass
class TypeData:
    """``g.nodes[t]`` / ``g.edges[t]``: its data as ``.data``."""

    data: DataView


class TypeView:
    """``g.nodes`` / ``g.edges``: ``g.nodes[t].data`` is the view of node type ``t``.

    ``stores`` holds each type's data (view key -> DistTensor), keyed by type name (nodes) or
    ``"src:etype:dst"`` (edges); ``resolve`` turns what the user wrote into that key (an
    unknown type is a DGLError, as DGL's)."""

    def __init__(self, stores: dict[str, dict[str, Any]], kind: str,
                 resolve: Callable[[Any], str]) -> None:
        self._stores = stores
        self._kind = kind
        self._resolve = resolve

    def __getitem__(self, typ: Any) -> TypeData:
        key = self._resolve(typ)
        return TypeData(DataView(self._stores[key], f"{self._kind}:{key}"))


class HeteroDataView(MutableMapping):
    """``g.ndata`` / ``g.edata`` of a graph with several node (edge) types, DGL's
    ``HeteroNodeDataView`` / ``HeteroEdgeDataView``: a mapping of key to ``{type: DistTensor}``
    (node types by name, edge types as canonical triples) holding the types that have the
    key. ``view[key] = {type: tensor, ...}`` sets the key on those types (a bare tensor is a
    DGLError: name the types); ``del view[key]`` removes it from every type. Unlike DGL's
    (which returns ``{}``), a key no type has is a KeyError, so ``in``, ``get`` and ``pop``
    answer as for any mapping.
    """

    def __init__(self, stores: dict[str, dict[str, Any]], kind: str,
                 resolve: Callable[[Any], str]) -> None:
        self._stores = stores  # as TypeView's, in type id order
        self._kind = kind
        self._resolve = resolve

    def _types(self) -> list[tuple[Any, DataView]]:
        return [(t if self._kind == "node" else parse_etype_key(t),
                 DataView(d, f"{self._kind}:{t}")) for t, d in self._stores.items()]

    def __getitem__(self, key: str) -> dict[Any, Any]:
        found = {t: v[key] for t, v in self._types() if key in v}
        if not found:
            raise KeyError(f"no {self._kind} type has data named {key!r}; have "
                           f"{sorted(self)}")
        return found

    def __setitem__(self, key: str, val: Any) -> None:
        if not isinstance(val, dict):
            raise DGLError(f"the graph has several {self._kind} types: set {key!r} with a dict "
                           f"{{type: DistTensor}} (or use g.{self._kind}s[TYPE].data)")
        types = TypeView(self._stores, self._kind, self._resolve)
        views = [(types[t].data, data) for t, data in val.items()]
        for view, data in views:  # every type checked before any is set
            view[key] = data

    def __delitem__(self, key: str) -> None:
        had = [v for _, v in self._types() if key in v]
        if not had:
            raise KeyError(f"no {self._kind} type has data named {key!r}")
        for v in had:
            del v[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k for _, v in self._types() for k in v))

    def __len__(self) -> int:
        return len(dict.fromkeys(k for _, v in self._types() for k in v))

    def __repr__(self) -> str:
        return f"HeteroDataView({self._kind!r}, {list(self)})"
