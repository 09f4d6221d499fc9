"""Build and write one part's shards: CSC of its inner edges, halo nodes and edges, features,
and the out-CSR of the edges whose source it owns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .format import ShardWriter, safe_name
from .graph import Graph, etype_key
from .memory import row_blocks
from .relabel import NodeRelabeling, OutPart, SortedEdges


@dataclass
class PartStats:
    """Counts for the quality report of one part."""

    num_nodes: int
    num_edges: int
    cut_edges: int
    num_halo: list[int]


def _ranges_gather(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated positions ``ptr[r]:ptr[r+1]`` for every r in ``rows`` (vectorised)."""
    starts = ptr[rows]
    lengths = ptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.int64)
    # Position i of the output = start of its row + offset within the row.
    row_of = np.repeat(np.arange(len(rows)), lengths)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts[row_of] + offset


def _new_eids(se: SortedEdges, edge_ranges: np.ndarray, e: int, pos: np.ndarray) -> np.ndarray:
    """Homogeneous new edge id of the edges at ``pos`` in the type's new order."""
    q = np.searchsorted(se.part_bounds[1:], pos, side="right")
    return pos - se.part_bounds[q] + edge_ranges[q, e, 0]


def write_part(
    writer: ShardWriter,
    p: int,
    graph: Graph,
    nodes: NodeRelabeling,
    sorted_edges: list[SortedEdges],
    edge_ranges: np.ndarray,
    halo_hops: int,
    trainer_piece: np.ndarray | None,
    *,
    drop_pages: bool = False,
) -> tuple[dict[str, Any], PartStats]:
    """Write part ``p``'s files and return its ``part-p`` JSON entry and its counts.

    Features are copied in row blocks (:func:`~partitioner.memory.row_blocks`), never as a
    whole copy of the part's rows; with ``drop_pages`` the input's mapped pages leave the
    resident set as each block is written (the lean regime of :mod:`partitioner.memory_plan`).
    """
    ntypes = graph.ntypes
    tid = {t: i for i, t in enumerate(ntypes)}
    prefix = f"part{p}"
    entry: dict[str, Any] = {
        "node_feats": f"{prefix}/node_feat",
        "edge_feats": f"{prefix}/edge_feat",
        "part_graph": f"{prefix}/graph",
        "csc": {},
    }
    owned_lo = int(nodes.ranges[p, 0, 0])
    owned_hi = int(nodes.ranges[p, -1, 1])
    total_nodes = int(nodes.new_of_old.shape[0])
    num_edges = 0
    cut_edges = 0
    # Sources of inner edges, marked over the homogeneous id space (O(n) and no sort).
    mark = np.zeros(total_nodes, bool) if halo_hops > 0 else None
    for e, (etype, se) in enumerate(zip(graph.edges, sorted_edges, strict=True)):
        d = tid[etype[2]]
        lo_pt, hi_pt = int(nodes.typed_start[p, d]), int(nodes.typed_start[p + 1, d])
        indptr = se.dst_ptr[lo_pt : hi_pt + 1] - se.dst_ptr[lo_pt]
        b0, b1 = int(se.part_bounds[p]), int(se.part_bounds[p + 1])
        indices = se.src_new[b0:b1]
        num_edges += b1 - b0
        # Inner edges whose source another part owns: summed over parts, the edge cut.
        cut_edges += len(indices) - int(np.count_nonzero((indices >= owned_lo) & (indices < owned_hi)))
        key = etype_key(etype)
        entry["csc"][key] = {
            "indptr": writer.save(f"{prefix}/graph/{e}_indptr.npy", indptr),
            "indices": writer.save(f"{prefix}/graph/{e}_indices.npy", indices),
        }
        if mark is not None:
            mark[indices] = True
        feats = graph.edata.get(etype, {})
        if feats or trainer_piece is not None:
            rows = se.order[b0:b1]
            entry.setdefault("edge_feat_files", {})
            for name, arr in feats.items():
                rel = f"{prefix}/edge_feat/{e}_{safe_name(name)}.npy"
                entry["edge_feat_files"][f"{key}/{name}"] = _save_rows(writer, rel, arr, rows,
                                                                       drop_pages)
            if trainer_piece is not None:
                # As DGL: an edge goes to the trainer of its destination node.
                dst_old = graph.edges[etype][1][rows] + int(graph.node_offsets()[d])
                rel = f"{prefix}/edge_feat/{e}_trainer_id.npy"
                entry["edge_feat_files"][f"{key}/trainer_id"] = writer.save(
                    rel, trainer_piece[dst_old])

    num_halo: list[int] = []
    if mark is not None:
        mark[owned_lo:owned_hi] = False
        hop1 = np.flatnonzero(mark)
        num_halo.append(len(hop1))
        halo = [hop1]
        if halo_hops >= 2:
            src_l, dst_l, eid_l = _in_edges_of(hop1, graph, nodes, sorted_edges, edge_ranges)
            hop2_mask = np.zeros(total_nodes, bool)
            hop2_mask[src_l] = True
            hop2_mask[mark] = False
            hop2_mask[owned_lo:owned_hi] = False
            hop2 = np.flatnonzero(hop2_mask)
            num_halo.append(len(hop2))
            halo.append(hop2)
            entry["halo_edges"] = {
                "src": writer.save(f"{prefix}/halo_src.npy", src_l),
                "dst": writer.save(f"{prefix}/halo_dst.npy", dst_l),
                "eids": writer.save(f"{prefix}/halo_eids.npy", eid_l),
            }
        entry["halo_nids"] = writer.save(f"{prefix}/halo_nids.npy", np.concatenate(halo))
    entry["num_halo_per_hop"] = num_halo

    node_files: dict[str, str] = {}
    for t, ntype in enumerate(ntypes):
        rows = nodes.orig[t][nodes.typed_start[p, t] : nodes.typed_start[p + 1, t]]
        for name, arr in graph.ndata.get(ntype, {}).items():
            rel = f"{prefix}/node_feat/{t}_{safe_name(name)}.npy"
            node_files[f"{ntype}/{name}"] = _save_rows(writer, rel, arr, rows, drop_pages)
        if trainer_piece is not None:
            offset = int(graph.node_offsets()[t])
            rel = f"{prefix}/node_feat/{t}_trainer_id.npy"
            node_files[f"{ntype}/trainer_id"] = writer.save(rel, trainer_piece[offset + rows])
    entry["node_feat_files"] = node_files
    stats = PartStats(owned_hi - owned_lo, num_edges, cut_edges, num_halo)
    return entry, stats


def _save_rows(writer: ShardWriter, rel: str, array: np.ndarray, rows: np.ndarray,
               drop_pages: bool) -> str:
    """Write ``array[rows]`` to ``rel`` block by block."""
    shape = (len(rows), *array.shape[1:])
    return writer.save_blocks(rel, array.dtype, shape,
                              row_blocks(array, rows, drop_pages=drop_pages))


def write_out_part(
    writer: ShardWriter, p: int, graph: Graph, out_part: list[OutPart]
) -> dict[str, dict[str, str]]:
    """Write part ``p``'s out-CSR files (from :class:`~partitioner.relabel.OutPartsJob`);
    return its ``csr`` JSON entry.

    Per edge type: ``indptr`` over the part's owned nodes of the source type (in per-type id
    order, as the CSC's is over the destination type), ``indices`` the homogeneous new
    destination ids, ``eids`` the homogeneous new edge ids.
    """
    prefix = f"part{p}/graph"
    entry: dict[str, dict[str, str]] = {}
    for e, (etype, (indptr, indices, eids)) in enumerate(zip(graph.edges, out_part, strict=True)):
        entry[etype_key(etype)] = {
            "indptr": writer.save(f"{prefix}/{e}_out_indptr.npy", indptr),
            "indices": writer.save(f"{prefix}/{e}_out_indices.npy", indices),
            "eids": writer.save(f"{prefix}/{e}_out_eids.npy", eids),
        }
    return entry


def _in_edges_of(
    targets: np.ndarray,
    graph: Graph,
    nodes: NodeRelabeling,
    sorted_edges: list[SortedEdges],
    edge_ranges: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All in-edges (src, dst, eid in new homogeneous ids) of the homogeneous new ids ``targets``."""
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    block_end = nodes.ranges[:, :, 1].reshape(-1)
    block = np.searchsorted(block_end, targets, side="right")
    part_of, type_of = np.divmod(block, len(graph.ntypes))
    srcs, dsts, eids = [], [], []
    for e, (etype, se) in enumerate(zip(graph.edges, sorted_edges, strict=True)):
        d = tid[etype[2]]
        sel = type_of == d
        tgt = targets[sel]
        q = part_of[sel]
        per_type = tgt - nodes.ranges[q, d, 0] + nodes.typed_start[q, d]
        pos = _ranges_gather(se.dst_ptr, per_type)
        counts = se.dst_ptr[per_type + 1] - se.dst_ptr[per_type]
        srcs.append(se.src_new[pos])
        dsts.append(np.repeat(tgt, counts))
        eids.append(_new_eids(se, edge_ranges, e, pos))
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(eids)
