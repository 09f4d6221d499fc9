"""Relabel nodes and edges so each part owns one contiguous id range per type (DGL's scheme).

New homogeneous node ids are laid out part-major, then node type, then old id (a stable sort),
so within one type the new ids grow with the part and keep the old order inside a part. An
edge belongs to the part that owns its destination; new edge ids are laid out part-major, then
edge type, then destination, which makes each part's edges of one type a CSC (in-edges grouped
by destination) for free.
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
        new_of_old: homogeneous old id -> homogeneous new id.
    """

    ranges: np.ndarray
    typed_start: np.ndarray
    orig: list[np.ndarray]
    per_type_new: list[np.ndarray]
    new_of_old: np.ndarray


@dataclass
class SortedEdges:
    """One edge type's edges in new-id order, with what the shard writer needs.

    Attributes:
        order: old per-type edge id of each per-type new edge id (``orig_eids``).
        src_new: homogeneous new source id of each edge, in new order.
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
    new_of_old = np.empty(int(offsets[-1]), np.int64)
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
        eid_idx = np.int32 if m < 2**31 - 1 and nd < 2**31 - 1 else np.int64
        idx = np.int32 if src_idx == np.int32 and m < 2**31 - 1 else np.int64
        src_i = src.astype(idx)
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
    counts = np.zeros((num_parts, len(graph.edges)), np.int64)
    for e, (etype, pre) in enumerate(zip(graph.edges, presorted, strict=True)):
        d = tid[etype[2]]
        part_d = part[offsets[d] : offsets[d + 1]]
        counts[:, e] = np.bincount(part_d, weights=pre.deg, minlength=num_parts).astype(np.int64)
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
        dst_ptr = np.zeros(graph.num_nodes[etype[2]] + 1, np.int64)
        np.cumsum(pre.deg[nodes.orig[d]], out=dst_ptr[1:])
        part_bounds = dst_ptr[nodes.typed_start[:, d]]
        sorted_edges.append(SortedEdges(order, src_new, dst_ptr, part_bounds))
    block_start = np.concatenate([[0], np.cumsum(counts.reshape(-1))[:-1]]).reshape(counts.shape)
    ranges = np.stack([block_start, block_start + counts], axis=-1)
    return sorted_edges, ranges


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
