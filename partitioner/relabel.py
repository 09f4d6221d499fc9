"""Relabel nodes and edges so each part owns one contiguous id range per type (DGL's scheme).

New homogeneous node ids are laid out part-major, then node type, then old id (a stable sort),
so within one type the new ids grow with the part and keep the old order inside a part. An
edge belongs to the part that owns its destination; new edge ids are laid out part-major, then
edge type, then destination, which makes each part's edges of one type a CSC (in-edges grouped
by destination) for free. The out-edges (grouped by source, for ``edge_dir="out"``) take one
more counting sort per edge type, by input source, beside METIS (:func:`presort_out_edges`),
and a gather of whole rows per part after it (:class:`OutPartsJob`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .errors import PartitionInputError
from .graph import Graph, etype_key
from .parallel import parallel_enabled, run_all, sparsetools, take


@dataclass
class NodeRelabeling:
    """Result of relabeling nodes.

    Attributes:
        ranges: ``(P, T, 2)`` homogeneous new-id range ``[start, end)`` of type t in part p.
        typed_start: ``(P + 1, T)`` per-type new id where part p's block of type t begins.
        orig: per node type, the old per-type id of each per-type new id (``orig[new] = old``).
        per_type_new: per node type, the per-type new id of each per-type old id.
        new_of_old: homogeneous old id -> homogeneous new id (int32 while the ids fit).
    """

    ranges: np.ndarray
    typed_start: np.ndarray
    orig: list[np.ndarray]
    per_type_new: list[np.ndarray]
    new_of_old: np.ndarray


def id_dtype(count: int) -> type[np.int32] | type[np.int64]:
    """int32 for ids below ``count`` when they all fit (``count <= 2**31 - 1``), else int64."""
    return np.int32 if count <= 2**31 - 1 else np.int64


def edge_id_dtype(num_edges: int, num_dst: int) -> type[np.int32] | type[np.int64]:
    """The dtype of one edge type's input edge ids as the presort keeps them (and
    ``orig_eids`` stores them): int32 while the edges and the destination ids fit."""
    return np.int32 if num_edges < 2**31 - 1 and num_dst < 2**31 - 1 else np.int64


@dataclass
class SortedEdges:
    """One edge type's edges in new-id order, with what the shard writer needs.

    Attributes:
        order: old per-type edge id of each per-type new edge id (``orig_eids``).
        src_new: homogeneous new source id of each edge, in new order (``new_of_old``'s dtype).
        dst_ptr: CSC pointer over the destination type's per-type new ids.
        part_bounds: ``(P + 1,)`` positions in new order where each part's block starts.
    """

    order: np.ndarray
    src_new: np.ndarray
    dst_ptr: np.ndarray
    part_bounds: np.ndarray


def relabel_nodes(graph: Graph, part: np.ndarray, num_parts: int) -> NodeRelabeling:
    """Compute the new node ids from ``part`` (owner part of each homogeneous old id)."""
    offsets = graph.node_offsets()
    ntypes = graph.ntypes
    counts = np.zeros((num_parts, len(ntypes)), np.int64)
    orig: list[np.ndarray] = []
    small = part.astype(np.int16 if num_parts < 2**15 else np.int32, copy=False)
    for t in range(len(ntypes)):
        part_t = small[offsets[t] : offsets[t + 1]]
        counts[:, t] = np.bincount(part_t, minlength=num_parts)
        # A stable sort on a small-int key is numpy's radix sort: linear time.
        orig.append(np.argsort(part_t, kind="stable"))
    block_start = np.concatenate([[0], np.cumsum(counts.reshape(-1))[:-1]]).reshape(counts.shape)
    ranges = np.stack([block_start, block_start + counts], axis=-1)
    typed_start = np.vstack([np.zeros((1, len(ntypes)), np.int64), np.cumsum(counts, axis=0)])
    # New ids as narrow as they fit: the CSC's indices are gathered from this table, so they
    # (in memory, on disk and in the servers' shared memory) take 4 bytes per edge, not 8.
    new_of_old = np.empty(int(offsets[-1]), id_dtype(int(offsets[-1])))
    per_type_new: list[np.ndarray] = []
    for t in range(len(ntypes)):
        part_t = small[offsets[t] : offsets[t + 1]].astype(np.intp)
        inv = np.empty(len(orig[t]), np.int64)
        inv[orig[t]] = np.arange(len(orig[t]), dtype=np.int64)
        per_type_new.append(inv)
        new_of_old[offsets[t] : offsets[t + 1]] = inv - typed_start[part_t, t] + ranges[part_t, t, 0]
    return NodeRelabeling(ranges, typed_start, orig, per_type_new, new_of_old)


@dataclass
class PresortedEdges:
    """One edge type's edges ordered by *old* destination id (stable), computed before METIS.

    Attributes:
        order: old per-type edge id at each position.
        src: homogeneous old source id at each position.
        deg: in-degree of each per-type old destination id.
    """

    order: np.ndarray
    src: np.ndarray
    deg: np.ndarray


def presort_edges(graph: Graph) -> list[PresortedEdges]:
    """Sort every edge type by old destination; needs no assignment, so it runs before METIS.

    Within one node type, new ids keep the old order inside a part, so after METIS a stable
    sort of these positions by part (a counting sort on a small key) yields new-destination
    order. One pass of scipy's COO->CSR kernel (a stable counting sort) carries both the source
    and the edge id, so no random gather from the (memory-mapped) input is needed.
    """
    kernels = sparsetools()
    offsets = graph.node_offsets()
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    # int32 ids where they fit: the passes after METIS move half the bytes.
    src_idx = np.int32 if offsets[-1] < 2**31 - 1 else np.int64
    out = []
    for etype, (src, dst) in graph.edges.items():
        m, nd = len(src), graph.num_nodes[etype[2]]
        # The kernel indexes by these ids and the relabel gathers by them: check them first.
        _check_ids(src, graph.num_nodes[etype[0]], etype, "source")
        _check_ids(dst, nd, etype, "destination")
        eid_idx = edge_id_dtype(m, nd)
        idx = np.int32 if src_idx == np.int32 and m < 2**31 - 1 else np.int64
        src_i: np.ndarray = src.astype(idx)
        if offsets[tid[etype[0]]]:
            src_i += idx(offsets[tid[etype[0]]])
        ptr = np.empty(nd + 1, idx)
        src_sorted = np.empty(m, idx)
        order = np.empty(m, eid_idx)
        kernels.coo_tocsr(
            nd, 1, m, dst.astype(idx, copy=False), src_i, np.arange(m, dtype=eid_idx), ptr,
            src_sorted, order,
        )
        del src_i
        deg = np.diff(ptr.astype(np.int64, copy=False))
        out.append(PresortedEdges(order, src_sorted.astype(src_idx, copy=False), deg))
    return out


def _check_ids(ids: np.ndarray, n: int, etype: tuple[str, str, str], end: str) -> None:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = int(np.flatnonzero((ids < 0) | (ids >= n))[0])
        raise PartitionInputError(
            f"edge type {etype_key(etype)!r}: {end} id {int(ids[bad])} at edge {bad} is out of "
            f"range for node type {etype[0 if end == 'source' else 2]!r} with {n} nodes"
        )


def sort_edges(
    graph: Graph,
    part: np.ndarray,
    nodes: NodeRelabeling,
    num_parts: int,
    presorted: list[PresortedEdges],
) -> tuple[list[SortedEdges], np.ndarray]:
    """Order every edge type's edges by new destination id and compute the edge ranges.

    Returns the per-type sorted edges and ``(P, E, 2)`` homogeneous new edge-id ranges.
    """
    offsets = graph.node_offsets()
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    sorted_edges: list[SortedEdges] = []
    for etype, pre in zip(graph.edges, presorted, strict=True):
        d = tid[etype[2]]
        part_d = part[offsets[d] : offsets[d + 1]]
        # Stable counting sort of the presorted edges by the part of their destination: the
        # source and the edge id move in one pass each (two threads), in the same order.
        m = len(pre.src)
        key = pre.src.dtype if m < 2**31 - 1 else np.int64
        edge_part = np.repeat(part_d.astype(key), pre.deg)
        # Buffers are taken on this thread: the workers' heaps would map fresh pages for them.
        src_old, order = np.empty(m, pre.src.dtype), np.empty(m, pre.order.dtype)
        scratch = np.empty(2 * m, np.int8)
        jobs = [
            functools.partial(_by_part, edge_part, pre.src, num_parts, src_old, scratch[:m]),
            functools.partial(_by_part, edge_part, pre.order, num_parts, order, scratch[m:]),
        ]
        if parallel_enabled(m):
            run_all(jobs)
        else:
            for job in jobs:
                job()
        del scratch
        del edge_part
        src_new = take(nodes.new_of_old, src_old)
        del src_old
        dst_ptr, part_bounds = _dst_ptr(pre, nodes, d)
        sorted_edges.append(SortedEdges(order, src_new, dst_ptr, part_bounds))
    return sorted_edges, edge_ranges(graph, part, num_parts, presorted)


def _dst_ptr(pre: PresortedEdges, nodes: NodeRelabeling, d: int) -> tuple[np.ndarray, np.ndarray]:
    """CSC pointer over the destination type's per-type new ids, and where each part begins."""
    dst_ptr = np.zeros(len(pre.deg) + 1, np.int64)
    np.cumsum(pre.deg[nodes.orig[d]], out=dst_ptr[1:])
    return dst_ptr, dst_ptr[nodes.typed_start[:, d]]


def edge_ranges(
    graph: Graph, part: np.ndarray, num_parts: int, presorted: list[PresortedEdges]
) -> np.ndarray:
    """``(P, E, 2)`` homogeneous new edge-id ranges (part-major, then edge type): an edge
    belongs to the part of its destination."""
    offsets = graph.node_offsets()
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    counts = np.zeros((num_parts, len(graph.edges)), np.int64)
    for e, (etype, pre) in enumerate(zip(graph.edges, presorted, strict=True)):
        d = tid[etype[2]]
        part_d = part[offsets[d] : offsets[d + 1]]
        counts[:, e] = np.bincount(part_d, weights=pre.deg, minlength=num_parts).astype(np.int64)
    block_start = np.concatenate([[0], np.cumsum(counts.reshape(-1))[:-1]]).reshape(counts.shape)
    return np.stack([block_start, block_start + counts], axis=-1)


def _by_part(
    edge_part: np.ndarray, values: np.ndarray, num_parts: int, out: np.ndarray,
    scratch: np.ndarray,
) -> None:
    """``out[:] = values`` stably sorted by ``edge_part`` (ints in ``[0, num_parts)``), one pass.

    ``scratch`` is an int8 array as long as ``values``, the kernel's unused data array.
    """
    kernels = sparsetools()
    m = len(edge_part)
    ptr = np.empty(num_parts + 1, edge_part.dtype)
    if values.dtype == edge_part.dtype:
        kernels.coo_tocsr(num_parts, 1, m, edge_part, values, scratch, ptr, out, scratch)
    else:  # the kernel's column array must share the key's dtype: sort values as its data
        junk = np.empty(m, edge_part.dtype)
        kernels.coo_tocsr(num_parts, 1, m, edge_part, edge_part, values, ptr, junk, out)


@dataclass
class OutPresorted:
    """One edge type's edges grouped by *input* source id (a CSR), computed beside METIS.

    Rows are homogeneous input ids (rows of other node types are empty). Within a row, edges
    are in the presort's order (input destination id, then input edge id), which does not
    depend on the assignment: samplers draw by offset within a row, so any partitioning of a
    graph samples the same out-edges for the same seed.

    Attributes:
        ptr: ``(N + 1,)`` position where each homogeneous input id's out-edges begin.
        dst: per-type input destination id of each edge.
        pos: position of each edge in the presort's order (its new edge id follows from it).
    """

    ptr: np.ndarray
    dst: np.ndarray
    pos: np.ndarray


def out_index_dtype(graph: Graph) -> type[np.int32] | type[np.int64]:
    """int32 when every node id, edge count and edge id fits (as the presort does), else int64."""
    return id_dtype(max(graph.total_nodes, graph.total_edges))


def presort_out_edges(graph: Graph, presorted: list[PresortedEdges]) -> list[OutPresorted]:
    """Group every edge type's edges by input source: one counting sort (O(E)) each.

    Needs no assignment, so it runs on the idle core while METIS runs: what is left after
    METIS (:class:`OutPartsJob`) is a gather of whole rows and two table look-ups per edge.
    """
    kernels = sparsetools()
    n = graph.total_nodes
    idx = out_index_dtype(graph)
    out = []
    for pre in presorted:
        m, nd = len(pre.src), len(pre.deg)
        run_ptr = np.zeros(nd + 1, idx)
        np.cumsum(pre.deg, out=run_ptr[1:])
        dst = np.empty(m, idx)
        kernels.expandptr(nd, run_ptr, dst)  # the presort's runs: input destination per edge
        res = OutPresorted(np.empty(n + 1, idx), np.empty(m, idx), np.empty(m, idx))
        kernels.coo_tocsr(n, 1, m, pre.src.astype(idx, copy=False), dst,
                          np.arange(m, dtype=idx), res.ptr, res.dst, res.pos)
        out.append(res)
    return out


OutPart = tuple[np.ndarray, np.ndarray, np.ndarray]


class OutPartsJob:
    """The out-CSR of every part and edge type from :func:`presort_out_edges`' rows.

    Built on the calling thread, which computes the small per-node tables and, with
    ``allocate`` (the fast regime), takes every output buffer (see
    :func:`~partitioner.memory.retained_heap`). Calling it fills every part (a worker can);
    :meth:`part` fills one part at a time instead, its buffers taken then, so that only the
    part being written holds them (the lean regime: part-sized buckets, not the whole graph's).
    Either gives, per part and edge type, ``(indptr, indices, eids)``: ``indptr`` over the
    part's owned nodes of the source type in per-type id order, ``indices`` homogeneous new
    destination ids, ``eids`` homogeneous new edge ids (the ids the CSC gives the same edges).
    """

    _CHUNK = 1 << 20

    def __init__(self, graph: Graph, part: np.ndarray, nodes: NodeRelabeling, num_parts: int,
                 presorted: list[PresortedEdges], out_pre: list[OutPresorted], *,
                 allocate: bool = True) -> None:
        offsets = graph.node_offsets()
        tid = {t: i for i, t in enumerate(graph.ntypes)}
        idx = out_index_dtype(graph)
        ranges = edge_ranges(graph, part, num_parts, presorted)
        new_of_old = nodes.new_of_old.astype(idx, copy=False)
        self.out_pre: list[OutPresorted | None] = list(out_pre)
        self.tables: list[tuple[np.ndarray, np.ndarray]] = []
        self.rows: list[list[np.ndarray]] = []
        self.parts: list[list[OutPart]] = [[] for _ in range(num_parts)]
        for e, (etype, pre, op) in enumerate(zip(graph.edges, presorted, out_pre, strict=True)):
            s, d = tid[etype[0]], tid[etype[2]]
            lo, nd = int(offsets[d]), len(pre.deg)
            # Per input destination v: its new homogeneous id, and new edge id minus presort
            # position for its run of edges (runs keep their order in the CSC).
            dst_ptr, part_bounds = _dst_ptr(pre, nodes, d)
            q = part[lo : lo + nd]
            run_start = np.cumsum(pre.deg) - pre.deg
            shift = dst_ptr[nodes.per_type_new[d]] - part_bounds[q] + ranges[q, e, 0] - run_start
            self.tables.append((new_of_old[lo : lo + nd], shift.astype(idx)))
            out_deg = np.diff(op.ptr)
            rows_e = []
            for p in range(num_parts):
                # Input ids of the part's owned nodes of the source type, in new id order.
                rows = (nodes.orig[s][nodes.typed_start[p, s] : nodes.typed_start[p + 1, s]]
                        + int(offsets[s])).astype(idx)
                indptr = np.zeros(len(rows) + 1, idx)
                np.cumsum(out_deg[rows], out=indptr[1:])
                k = int(indptr[-1]) if allocate else 0  # else taken by part()
                self.parts[p].append((indptr, np.empty(k, idx), np.empty(k, idx)))
                rows_e.append(rows)
            self.rows.append(rows_e)
        self._allocated = allocate
        self._done = 0

    def __call__(self) -> list[list[OutPart]]:
        for e in range(len(self.tables)):
            for p in range(len(self.parts)):
                self._fill(e, p)
            self.out_pre[e] = None  # the rows of this type are no longer needed
        return self.parts

    def part(self, p: int) -> list[OutPart]:
        """Part ``p``'s out-CSR of every edge type, its buffers taken now; call it once per
        part, in order. After the last part the rows are dropped, and the job holds nothing
        of the parts it handed out."""
        assert p == self._done, "OutPartsJob.part runs once per part, in order"
        for e in range(len(self.tables)):
            if not self._allocated:
                indptr, indices, _ = self.parts[p][e]
                k = int(indptr[-1])
                self.parts[p][e] = (indptr, np.empty(k, indices.dtype), np.empty(k, indices.dtype))
            self._fill(e, p)
        self._done += 1
        filled, self.parts[p] = self.parts[p], []
        if self._done == len(self.parts):
            self.out_pre = [None] * len(self.out_pre)
            self.tables, self.rows = [], []
        return filled

    def _fill(self, e: int, p: int) -> None:
        kernels = sparsetools()
        new_dst, shift = self.tables[e]
        op = self.out_pre[e]
        assert op is not None, "an OutPartsJob fills each part once"
        _, indices, eids = self.parts[p][e]
        rows = self.rows[e][p]
        kernels.csr_row_index(len(rows), rows, op.ptr, op.dst, op.pos, indices, eids)
        for a in range(0, len(indices), self._CHUNK):  # small temporaries only
            old = indices[a : a + self._CHUNK]
            eids[a : a + self._CHUNK] += shift[old]
            indices[a : a + self._CHUNK] = new_dst[old]
