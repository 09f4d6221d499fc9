"""Which nodes and edges a rank reads: contiguous blocks of the homogeneous node ids and of
each edge type's edge ids, as even as integers allow."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from .exchange import block_bounds


@dataclass(frozen=True)
class Share:
    """Rank ``rank``'s blocks of a graph among ``size`` ranks.

    Attributes:
        node_bounds: ``(size + 1,)`` homogeneous node id bounds of every rank's block (the
            ``vtxdist`` of ParMETIS).
        edge_bounds: per edge type, the ``(size + 1,)`` edge id bounds of every rank's block.
    """

    rank: int
    size: int
    node_bounds: np.ndarray
    edge_bounds: list[np.ndarray]

    @classmethod
    def of(cls, graph: Graph, rank: int, size: int) -> Share:
        """Rank ``rank``'s share of ``graph`` among ``size`` ranks."""
        return cls(rank, size, block_bounds(graph.total_nodes, size),
                   [block_bounds(graph.num_edges(et), size) for et in graph.edges])

    @property
    def lo(self) -> int:
        """First homogeneous node id of this rank's block."""
        return int(self.node_bounds[self.rank])

    @property
    def hi(self) -> int:
        """End of this rank's node block."""
        return int(self.node_bounds[self.rank + 1])

    def type_slices(self, graph: Graph) -> Iterator[tuple[int, int, int, int]]:
        """``(type, lo, hi, at)`` for every node type in this block: per-type ids
        ``lo:hi``, at position ``at`` of the block."""
        offsets = graph.node_offsets()
        for t in range(len(graph.ntypes)):
            a = min(max(self.lo, int(offsets[t])), int(offsets[t + 1]))
            b = max(min(self.hi, int(offsets[t + 1])), a)  # a == b: none of this type
            at = min(max(a - self.lo, 0), self.hi - self.lo)
            yield t, a - int(offsets[t]), b - int(offsets[t]), at

    def edge_range(self, e: int) -> tuple[int, int]:
        """This rank's block of edge type ``e``'s edge ids."""
        return int(self.edge_bounds[e][self.rank]), int(self.edge_bounds[e][self.rank + 1])

    def homogeneous_edges(self, graph: Graph, e: int) -> tuple[np.ndarray, np.ndarray]:
        """This rank's block of edge type ``e`` as homogeneous (old) source and destination
        ids (int64; read from the input's arrays, which may be memory-mapped)."""
        offsets = graph.node_offsets()
        tid = {t: i for i, t in enumerate(graph.ntypes)}
        etype = list(graph.edges)[e]
        src, dst = graph.edges[etype]
        a, b = self.edge_range(e)
        return (np.asarray(src[a:b], np.int64) + offsets[tid[etype[0]]],
                np.asarray(dst[a:b], np.int64) + offsets[tid[etype[2]]])
