"""``g.ndata``, ``g.edata``, ``g.nodes[t].data``, ``g.edges[t].data``: real mappings of name to
``DistTensor`` for one node or edge type (DGL's ``view.py``)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .dist_tensor import DistTensor
from .errors import DistError

if TYPE_CHECKING:
    from .dist_graph import DistGraph


class DataView(MutableMapping):
    """The named tensors of one partition policy (``"node:TYPE"`` or ``"edge:S:E:D"``).

    Reading a name gives its ``DistTensor``; assigning registers a ``DistTensor`` made with
    that name and policy (DGL's ``g.ndata[name] = DistTensor(...)``); ``del`` removes the name
    from the graph's view (the tensor's rows stay with their machines).
    """

    def __init__(self, graph: DistGraph, policy: str) -> None:
        self._graph = graph
        self._policy = policy
        self._prefix = policy.split(":", 1)[1] + "/"

    def _full(self, name: str) -> str:
        return self._prefix + name

    def _names(self) -> list[str]:
        n = len(self._prefix)
        return [full[n:] for full, meta in self._graph._tensors.items()
                if meta.policy == self._policy and full.startswith(self._prefix)]

    def __getitem__(self, name: str) -> DistTensor:
        meta = self._graph._tensors.get(self._full(name))
        if meta is None or meta.policy != self._policy:
            raise KeyError(f"{self._policy}: no data named {name!r}; have {sorted(self._names())}")
        return DistTensor._existing(self._graph, self._full(name), meta)

    def __setitem__(self, name: str, tensor: Any) -> None:
        full = self._full(name)
        if not isinstance(tensor, DistTensor) or tensor.name != full \
                or tensor.part_policy != self._policy:
            raise DistError(
                f"assign a DistTensor created with name={full!r} and part_policy={self._policy!r}"
            )
        self._graph._register(tensor)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(f"{self._policy}: no data named {name!r}")
        del self._graph._tensors[self._full(name)]

    def __contains__(self, name: object) -> bool:
        meta = self._graph._tensors.get(self._prefix + name) if isinstance(name, str) else None
        return meta is not None and meta.policy == self._policy

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"DataView({self._policy!r}, {sorted(self._names())})"


@dataclass
class TypeData:
    """``g.nodes[t]`` / ``g.edges[t]``: its data as ``.data``."""

    data: DataView


class TypeView:
    """``g.nodes`` / ``g.edges``: ``g.nodes[t].data`` is the view of node type ``t``."""

    def __init__(self, graph: DistGraph, kind: str) -> None:
        self._graph = graph
        self._kind = kind

    def __getitem__(self, typ: Any) -> TypeData:
        if self._kind == "edge":
            typ = self._graph._canonical(typ)
        return TypeData(DataView(self._graph, f"{self._kind}:{typ}"))
