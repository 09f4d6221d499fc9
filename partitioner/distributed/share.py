"""Which nodes and edges a rank reads: per node type and per edge type, one contiguous block of
ids per rank. The blocks are the input's chunks where it has one chunk per rank (DGL's chunked
format: rank r reads chunk r and no other), else as even as integers allow.

A rank's nodes are its blocks of every type, type after type: its *local* ids. The *rank-major*
ids number all nodes rank after rank in that order (ParMETIS's ``vtxdist`` numbering); the
homogeneous ids (types concatenated, the input's order) are the partition's old ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from .exchange import block_bounds


@dataclass(frozen=True)
class Share:
    """Rank ``rank``'s blocks of a graph among ``size`` ranks.

    Attributes:
        offsets: ``(T + 1,)`` where each node type starts among the homogeneous ids.
        node_bounds: per node type, the ``(size + 1,)`` per-type id bounds of every rank's block.
        edge_bounds: per edge type, the ``(size + 1,)`` edge id bounds of every rank's block.
    """

    rank: int
    size: int
    offsets: np.ndarray
    node_bounds: list[np.ndarray]
    edge_bounds: list[np.ndarray]

    @classmethod
    def of(cls, graph: Graph, rank: int, size: int, *,
           node_chunks: Sequence[Sequence[int]] | None = None,
           edge_chunks: Sequence[Sequence[int]] | None = None) -> Share:
        """Rank ``rank``'s share of ``graph`` among ``size`` ranks; a type whose chunk sizes
        (``node_chunks`` per node type, ``edge_chunks`` per edge type) count ``size`` chunks
        is split at its chunks."""

        def bounds(total: int, chunks: Sequence[int] | None) -> np.ndarray:
            if chunks is not None and len(chunks) == size:
                return np.concatenate([[0], np.cumsum(np.asarray(chunks, np.int64))])
            return block_bounds(total, size)

        nodes = [bounds(graph.num_nodes[t], node_chunks[i] if node_chunks else None)
                 for i, t in enumerate(graph.ntypes)]
        edges = [bounds(graph.num_edges(et), edge_chunks[i] if edge_chunks else None)
                 for i, et in enumerate(graph.edges)]
        return cls(rank, size, graph.node_offsets(), nodes, edges)

    @property
    def counts(self) -> np.ndarray:
        """``(T, size)`` nodes of each type in each rank's block."""
        return np.stack([np.diff(b) for b in self.node_bounds])

    @property
    def vtxdist(self) -> np.ndarray:
        """``(size + 1,)`` where each rank's nodes start among the rank-major ids."""
        return np.concatenate([[0], np.cumsum(self.counts.sum(axis=0))])

    @property
    def num_local(self) -> int:
        """Nodes in this rank's blocks, all types."""
        return int(self.counts[:, self.rank].sum())

    def type_slices(self) -> Iterator[tuple[int, int, int, int]]:
        """``(type, lo, hi, at)`` for every node type: this rank's per-type ids ``lo:hi``,
        at local id ``at`` (an empty slice where the rank holds none of the type)."""
        at = 0
        for t, b in enumerate(self.node_bounds):
            lo, hi = int(b[self.rank]), int(b[self.rank + 1])
            yield t, lo, hi, at
            at += hi - lo

    def homogeneous_ids(self) -> np.ndarray:
        """The homogeneous id of each local node."""
        return np.concatenate([np.arange(lo, hi, dtype=np.int64) + self.offsets[t]
                               for t, lo, hi, _ in self.type_slices()])

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(owner rank, local id there)`` of homogeneous ``ids``."""
        counts = self.counts
        # Blocks type-major then rank: starting homogeneous id and local id of each.
        starts = np.concatenate([self.offsets[t] + b[:-1] for t, b in enumerate(self.node_bounds)])
        local_start = (np.cumsum(counts, axis=0) - counts).reshape(-1)
        block = np.searchsorted(starts, ids, side="right") - 1
        # Empty blocks share their start with the next: searchsorted lands on the last of
        # them, which is the one that holds the id (the first non-empty one at that start).
        return block % self.size, ids - starts[block] + local_start[block]

    def rank_major(self, ids: np.ndarray) -> np.ndarray:
        """The rank-major id (ParMETIS's numbering) of homogeneous ``ids``."""
        owner, local = self.locate(ids)
        return self.vtxdist[owner] + local

    def edge_range(self, e: int) -> tuple[int, int]:
        """This rank's block of edge type ``e``'s edge ids."""
        return int(self.edge_bounds[e][self.rank]), int(self.edge_bounds[e][self.rank + 1])

    def homogeneous_edges(self, graph: Graph, e: int) -> tuple[np.ndarray, np.ndarray]:
        """This rank's block of edge type ``e`` as homogeneous (old) source and destination
        ids (int64; read from the input's arrays, which may be memory-mapped or chunked)."""
        tid = {t: i for i, t in enumerate(graph.ntypes)}
        etype = list(graph.edges)[e]
        src, dst = graph.edges[etype]
        a, b = self.edge_range(e)
        return (np.asarray(src[a:b], np.int64) + self.offsets[tid[etype[0]]],
                np.asarray(dst[a:b], np.int64) + self.offsets[tid[etype[2]]])
