"""The in-memory graph every reader produces and the partitioner consumes.

A graph has node types and canonical edge types ``(src_type, etype, dst_type)``; a homogeneous
graph is the special case with node type ``_N`` and edge type ``("_N", "_E", "_N")``, as in DGL.
Node ids are per type (0..num_nodes[t]-1). The *homogeneous id space* puts node types one after
the other in the order of ``num_nodes`` (and edge types in the order of ``edges``), which is how
DGL's ``to_homogeneous`` numbers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import PartitionInputError

HOMO_NTYPE = "_N"
HOMO_ETYPE = ("_N", "_E", "_N")

CanonicalEtype = tuple[str, str, str]


def etype_key(etype: CanonicalEtype) -> str:
    """The string form of a canonical edge type used in JSON: ``"src:etype:dst"``."""
    return ":".join(etype)


def parse_etype_key(key: str) -> CanonicalEtype:
    """Inverse of :func:`etype_key`; raises ``ValueError`` on anything but three fields."""
    parts = key.split(":")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"edge type {key!r} is not of the form 'src_type:etype:dst_type'")
    return (parts[0], parts[1], parts[2])


@dataclass
class Graph:
    """A (possibly heterogeneous) graph held as per-type COO arrays plus feature arrays.

    Attributes:
        num_nodes: node type -> number of nodes; the dict order is the node type id order.
        edges: canonical edge type -> ``(src, dst)`` int64 arrays of per-type node ids; the
            dict order is the edge type id order.
        ndata: node type -> feature name -> array whose first dimension is ``num_nodes[type]``.
        edata: canonical edge type -> feature name -> array with one row per edge.
    """

    num_nodes: dict[str, int]
    edges: dict[CanonicalEtype, tuple[np.ndarray, np.ndarray]]
    ndata: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    edata: dict[CanonicalEtype, dict[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def homogeneous(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        num_nodes: int,
        ndata: dict[str, np.ndarray] | None = None,
        edata: dict[str, np.ndarray] | None = None,
    ) -> Graph:
        """Build a one-type graph (``_N`` / ``_N:_E:_N``) from COO arrays."""
        return cls(
            num_nodes={HOMO_NTYPE: int(num_nodes)},
            edges={HOMO_ETYPE: (np.asarray(src, np.int64), np.asarray(dst, np.int64))},
            ndata={HOMO_NTYPE: dict(ndata or {})},
            edata={HOMO_ETYPE: dict(edata or {})},
        )

    @property
    def ntypes(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def canonical_etypes(self) -> list[CanonicalEtype]:
        return list(self.edges)

    @property
    def is_homogeneous(self) -> bool:
        return self.ntypes == [HOMO_NTYPE] and self.canonical_etypes == [HOMO_ETYPE]

    @property
    def total_nodes(self) -> int:
        return int(sum(self.num_nodes.values()))

    @property
    def total_edges(self) -> int:
        return int(sum(len(s) for s, _ in self.edges.values()))

    def num_edges(self, etype: CanonicalEtype) -> int:
        return int(len(self.edges[etype][0]))

    def node_offsets(self) -> np.ndarray:
        """Start of each node type in the homogeneous id space (length ``len(ntypes) + 1``)."""
        return np.concatenate([[0], np.cumsum([self.num_nodes[t] for t in self.ntypes])]).astype(
            np.int64
        )

    def edge_offsets(self) -> np.ndarray:
        """Start of each edge type in the homogeneous edge id space."""
        counts = [self.num_edges(e) for e in self.canonical_etypes]
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def arrays(self) -> dict[str, list[np.ndarray]]:
        """Every array of the graph by kind: ``"edges"`` (src and dst of each type),
        ``"ndata"`` and ``"edata"`` (the features)."""
        return {
            "edges": [a for pair in self.edges.values() for a in pair],
            "ndata": [a for feats in self.ndata.values() for a in feats.values()],
            "edata": [a for feats in self.edata.values() for a in feats.values()],
        }

    def validate(self, source: str = "<graph>") -> None:
        """Check types, id ranges and feature row counts; raise PartitionInputError naming ``source``."""
        if not self.num_nodes:
            raise PartitionInputError("the graph has no node types", path=source)
        for ntype, n in self.num_nodes.items():
            if int(n) < 0:
                raise PartitionInputError(f"node type {ntype!r} has a negative node count {n}", path=source)
        for etype, (src, dst) in self.edges.items():
            key = etype_key(etype)
            for end, ntype in (("source", etype[0]), ("destination", etype[2])):
                if ntype not in self.num_nodes:
                    raise PartitionInputError(
                        f"edge type {key!r} names unknown {end} node type {ntype!r}; "
                        f"known node types: {', '.join(self.ntypes)}",
                        path=source,
                    )
            if src.shape != dst.shape or src.ndim != 1:
                raise PartitionInputError(
                    f"edge type {key!r}: src and dst must be 1-D arrays of equal length "
                    f"(got {src.shape} and {dst.shape})",
                    path=source,
                )
            for name, ids, ntype in (("src", src, etype[0]), ("dst", dst, etype[2])):
                if ids.size == 0:
                    continue
                lo, hi = int(ids.min()), int(ids.max())
                n = self.num_nodes[ntype]
                if lo < 0:
                    bad = int(np.flatnonzero(ids < 0)[0])
                    raise PartitionInputError(
                        f"edge type {key!r}: {name} id {int(ids[bad])} at edge {bad} is negative",
                        path=source,
                    )
                if hi >= n:
                    bad = int(np.flatnonzero(ids >= n)[0])
                    raise PartitionInputError(
                        f"edge type {key!r}: {name} id {int(ids[bad])} at edge {bad} is out of range "
                        f"for node type {ntype!r} with {n} nodes",
                        path=source,
                    )
        for ntype, feats in self.ndata.items():
            if ntype not in self.num_nodes:
                raise PartitionInputError(
                    f"node data for unknown node type {ntype!r}; known: {', '.join(self.ntypes)}",
                    path=source,
                )
            for name, arr in feats.items():
                if arr.ndim == 0 or arr.shape[0] != self.num_nodes[ntype]:
                    raise PartitionInputError(
                        f"node feature {ntype}/{name} has {arr.shape[0] if arr.ndim else 0} rows "
                        f"but node type {ntype!r} has {self.num_nodes[ntype]} nodes",
                        path=source,
                    )
        for etype, feats in self.edata.items():
            if etype not in self.edges:
                raise PartitionInputError(
                    f"edge data for unknown edge type {etype_key(etype)!r}", path=source
                )
            for name, arr in feats.items():
                if arr.ndim == 0 or arr.shape[0] != self.num_edges(etype):
                    raise PartitionInputError(
                        f"edge feature {etype_key(etype)}/{name} has {arr.shape[0] if arr.ndim else 0} "
                        f"rows but edge type {etype_key(etype)!r} has {self.num_edges(etype)} edges",
                        path=source,
                    )
