"""``partition_distributed``: every MPI rank reads its share of the input, the parts are made
across the ranks, and each part is written by the rank that holds it, in the single-machine
partitioner's format, byte for byte the same files for the same assignment.

The flow (every step collective, messages bounded by :mod:`.exchange`):

1. each rank reads its block of node ids and of every edge type's edge ids (:mod:`.share`);
2. the part of each node of its block (:mod:`.assign`: given, random, or ParMETIS);
3. new ids by prefix sums per (part, type) over the ranks' counts: part-major, then type, then
   old id, as :mod:`partitioner.relabel` lays them out;
4. nodes (ids, features, trainer pieces) go to the rank that writes their part;
5. per edge type, the new ids of both ends are asked of their owners (unique ids, bounded
   messages), and each edge goes to the writer of its destination's part: the CSC, the halo,
   the edge features;
6. with out-edges, each edge then goes on to the writer of its source's part;
7. rank 0 receives the original ids part by part and writes them, and the config JSON.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..assignment import METHOD as ASSIGNMENT
from ..assignment import given_assignment, write_assignment
from ..errors import PartitionOptionError
from ..format import ShardWriter, safe_name, write_config
from ..graph import Graph, etype_key
from ..memory import retained_heap
from ..pipeline import ProgressReporter, base_config, check_options, feature_schema
from ..relabel import edge_id_dtype, id_dtype, out_index_dtype
from ..report import report_from_counts
from ..shards import PartStats
from .assign import assign_block
from .exchange import DEFAULT_BUDGET, exchange, lookup
from .output import shared_output_dir
from .share import Share

METHODS = ("parmetis", "random")
_TAG = 17


def writer_of(part: np.ndarray | int, size: int) -> Any:
    """The rank that writes part ``part`` (round robin over the ranks)."""
    if isinstance(part, np.ndarray) and part.size and int(part.max()) < size:
        return part  # no more parts than ranks: part p is rank p's
    return part % size


@dataclass
class _Layout:
    """The new node ids: every rank knows the ranges, each its own block's ids."""

    ranges: np.ndarray  # (P, T, 2) homogeneous new-id range of type t in part p
    new: np.ndarray  # new homogeneous id of each node of this rank's block
    part: np.ndarray  # part of each node of the block
    piece: np.ndarray  # trainer piece of each node of the block

    def part_of_new(self, new_ids: np.ndarray) -> np.ndarray:
        """The part that owns each new homogeneous id."""
        num_types = self.ranges.shape[1]
        return np.searchsorted(self.ranges[:, :, 1].reshape(-1), new_ids, side="right") \
            // num_types


@dataclass
class _Written:
    """What this rank wrote: part entries, counts, and the original ids rank 0 writes."""

    entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    stats: dict[int, PartStats] = field(default_factory=dict)
    orig_nids: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    orig_eids: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)


class _Clock:
    def __init__(self, reporter: ProgressReporter | None, rank: int) -> None:
        self.reporter = reporter if rank == 0 else None
        self.times: dict[str, float] = {}
        self._name = ""
        self._t0 = 0.0

    def start(self, name: str, detail: str = "") -> None:
        self.stop()
        self._name, self._t0 = name, time.perf_counter()
        if self.reporter is not None:
            self.reporter.phase_start(name, detail)

    def stop(self) -> None:
        if self._name:
            dt = time.perf_counter() - self._t0
            self.times[self._name] = self.times.get(self._name, 0.0) + dt
            if self.reporter is not None:
                self.reporter.phase_end(self._name, dt)
            self._name = ""


def partition_distributed(
    comm: Any,
    graph: Graph,
    graph_name: str,
    num_parts: int,
    out: str | Path,
    *,
    method: str = "parmetis",
    assignment: str | Path | np.ndarray | None = None,
    halo_hops: int = 1,
    balance_train: bool = True,
    balance_edges: bool = False,
    imbalance: float = 1.03,
    seed: int = 0,
    trainers_per_machine: int = 1,
    out_edges: bool = True,
    overwrite: bool = False,
    save_assignment: str | Path | None = None,
    reporter: ProgressReporter | None = None,
    budget: int = DEFAULT_BUDGET,
    node_chunks: list[list[int]] | None = None,
    edge_chunks: list[list[int]] | None = None,
) -> dict[str, Any] | None:
    """Collective: partition ``graph`` (each rank's view of the same input, read lazily: a rank
    touches only its share) into ``num_parts`` parts under ``out``; every rank of ``comm`` calls
    it at once. Part ``p`` is written by rank ``p % comm.size``; rank 0 writes the config,
    whose ``files`` lists every part's files (a host that does not share rank 0's file system
    holds only the parts its ranks wrote). Returns the config on rank 0, None elsewhere.

    ``method`` is ``parmetis`` (:mod:`partitioner.methods.parmetis`; it balances nodes, the
    training nodes with ``balance_train`` and in-degree with ``balance_edges``) or ``random``
    (the same draw as the single-machine partitioner's); ``assignment`` gives every node's
    part instead.
    The files are those :func:`partitioner.pipeline.partition_graph` writes for the same
    assignment, byte for byte; halos of 0 or 1 hop. ``node_chunks`` / ``edge_chunks`` (the
    input's chunk sizes per type) make a rank's share its chunk where there is one per rank.
    """
    if assignment is not None:
        method = ASSIGNMENT
    # ParMETIS's id width is its library's (64 bits for PT-Scotch's): no 32-bit limit here.
    check_options(graph, graph_name, num_parts, "random" if method == "parmetis" else method,
                  halo_hops, "cut", imbalance, trainers_per_machine)
    if method not in (*METHODS, ASSIGNMENT):
        raise PartitionOptionError(f"--distributed partitions with {' or '.join(METHODS)} (or "
                                   f"--assignment), not {method!r}")
    if halo_hops > 1:
        raise PartitionOptionError(f"--distributed writes halos of 0 or 1 hop, not {halo_hops}",
                                   hint="give --halo-hops 1 (the default)")
    rank, size = comm.Get_rank(), comm.Get_size()
    share = Share.of(graph, rank, size, node_chunks=node_chunks, edge_chunks=edge_chunks)
    clock = _Clock(reporter, rank)
    out = Path(out)
    if isinstance(assignment, (str, Path)):
        # Every rank reads and checks the whole file before any folder is made: a bad file is
        # the same error on every rank, and nothing is left to remove.
        assignment = given_assignment(assignment, graph.total_nodes, num_parts)
    # Freed arrays stay in the heap for the next phase's (see memory.retained_heap).
    with retained_heap(), shared_output_dir(comm, out, overwrite) as tmp:
        clock.start("assign", f"{method}: {num_parts * trainers_per_machine} parts on "
                              f"{size} ranks")
        block = assign_block(comm, graph, share, num_parts, trainers_per_machine, method=method,
                             assignment=assignment, seed=seed, imbalance=imbalance,
                             balance_train=balance_train, balance_edges=balance_edges,
                             budget=budget)
        if block.unbalanced and clock.reporter is not None:
            clock.reporter.note(f"{block.library} balances {block.balanced[0]} only: the "
                                f"report gives the balance reached on "
                                f"{', '.join(block.unbalanced)}")
        clock.start("relabel", "contiguous id ranges per part and type")
        layout = _relabel(comm, graph, share, block.piece, trainers_per_machine, num_parts)
        writer = ShardWriter(tmp, output=out)
        written = _Written()
        mine = [p for p in range(num_parts) if writer_of(p, size) == rank]
        for p in mine:
            written.entries[p] = {"node_feats": f"part{p}/node_feat",
                                  "edge_feats": f"part{p}/edge_feat",
                                  "part_graph": f"part{p}/graph", "csc": {}}
        clock.start("edges", "in-edges to their destination's part")
        edge_ranges, in_edges = _in_edges(comm, graph, share, layout, mine, writer, written,
                                          trainers_per_machine > 1, halo_hops, budget)
        clock.start("nodes", "nodes and features to their part")
        _nodes(comm, graph, share, layout, mine, writer, written, trainers_per_machine > 1,
               budget)
        if out_edges:
            clock.start("out-edges", "out-edges to their source's part")
            _out_edges(comm, graph, layout, edge_ranges, in_edges, mine, writer, written, budget)
        del in_edges
        clock.start("ids", "original ids to rank 0")
        orig_files = _original_ids(comm, graph, num_parts, writer, written)
        clock.stop()
        train = _train_counts(comm, graph, share, layout, num_parts)
        times = {k: float(comm.allreduce(v, op=_max())) for k, v in clock.times.items()}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        gathered = comm.gather((written.entries, written.stats, writer.files, peak), root=0)
        config = None
        if rank == 0:
            entries: dict[int, dict[str, Any]] = {}
            stats: dict[int, PartStats] = {}
            files: dict[str, Any] = {}
            peaks = []
            for e, s, f, pk in gathered:
                entries.update(e)
                stats.update(s)
                files.update(f)
                peaks.append(int(pk))
            config = base_config(graph, graph_name, num_parts, method, halo_hops,
                                 layout.ranges, edge_ranges)
            for p in range(num_parts):
                config[f"part-{p}"] = entries[p]
            config.update(orig_files)
            config.update({
                "num_trainers_per_machine": trainers_per_machine,
                "balance": block.balanced,
                "objtype": None,
                "imbalance": imbalance,
                "seed": seed,
                "feature_schema": feature_schema(graph, trainers_per_machine > 1),
                "files": dict(sorted(files.items())),
            })
            quality = report_from_counts([stats[p] for p in range(num_parts)], train,
                                         graph.total_edges, times, max(peaks))
            quality["ranks"] = size
            quality["peak_memory_bytes_per_rank"] = peaks
            if block.library:
                quality["library"] = block.library
            config["quality"] = quality
            write_config(tmp / f"{graph_name}.json", config)
    if save_assignment is not None:
        _save_assignment(comm, share, layout.part, graph.total_nodes, save_assignment)
    return config


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _relabel(comm: Any, graph: Graph, share: Share, piece: np.ndarray, trainers: int,
             num_parts: int) -> _Layout:
    """New ids by prefix sums per (part, type) of every rank's counts."""
    # Narrow ids while they fit: every column a rank holds or sends is half as wide.
    piece = piece.astype(np.int32 if num_parts * trainers < 2**31 else np.int64)
    part = piece // trainers if trainers > 1 else piece
    num_types = len(graph.ntypes)
    counts = np.zeros((num_parts, num_types), np.int64)
    slices = list(share.type_slices())
    for t, lo, hi, at in slices:
        counts[:, t] = np.bincount(part[at:at + hi - lo], minlength=num_parts)
    every = np.array(comm.allgather(counts)).reshape(share.size, num_parts, num_types)
    total = every.sum(axis=0)
    block_start = np.concatenate([[0], np.cumsum(total.reshape(-1))[:-1]]).reshape(total.shape)
    ranges = np.stack([block_start, block_start + total], axis=-1)
    base = block_start + every[:share.rank].sum(axis=0)
    new = np.empty(share.num_local, id_dtype(graph.total_nodes))
    for t, lo, hi, at in slices:
        pt = part[at:at + hi - lo]
        order = np.argsort(pt, kind="stable")
        sp = pt[order]
        run_start = np.searchsorted(sp, sp, side="left")
        new[at + order] = base[sp, t] + np.arange(len(sp)) - run_start
    return _Layout(ranges, new, part, piece)


def _nodes(comm: Any, graph: Graph, share: Share, layout: _Layout, mine: list[int],
           writer: ShardWriter, written: _Written, trainer_ids: bool, budget: int) -> None:
    """Per node type: this block's nodes (new id, old id, piece, features) to their part's
    writer, which writes each part's rows in new id order."""
    for t, lo, hi, at in share.type_slices():
        ntype = graph.ntypes[t]
        feats = graph.ndata.get(ntype, {})
        n = hi - lo
        cols = [layout.new[at:at + n], np.arange(lo, hi, dtype=id_dtype(graph.num_nodes[ntype])),
                layout.piece[at:at + n], *(np.asarray(a[lo:hi]) for a in feats.values())]
        (new, old, piece, *rows), _ = exchange(
            comm, writer_of(layout.part[at:at + n], share.size), cols, budget=budget)
        order = np.argsort(new, kind="stable")
        new = new[order]
        for p in mine:
            a, b = np.searchsorted(new, layout.ranges[p, t], side="left")
            sel = order[a:b]
            files = written.entries[p].setdefault("node_feat_files", {})
            for name, values in zip(feats, rows, strict=True):
                rel = f"part{p}/node_feat/{t}_{safe_name(name)}.npy"
                files[f"{ntype}/{name}"] = writer.save(rel, values[sel])
            if trainer_ids:
                files[f"{ntype}/trainer_id"] = writer.save(
                    f"part{p}/node_feat/{t}_trainer_id.npy", piece[sel].astype(np.int64))
            written.orig_nids[(t, p)] = old[sel]


@dataclass
class _InEdges:
    """One edge type's edges at the writer of their destination's part, in new order."""

    src_new: np.ndarray
    dst_new: np.ndarray
    dst_old: np.ndarray
    eid_old: np.ndarray
    eid_new: np.ndarray


def _in_edges(comm: Any, graph: Graph, share: Share, layout: _Layout, mine: list[int],
              writer: ShardWriter, written: _Written, trainer_ids: bool, halo_hops: int,
              budget: int) -> tuple[np.ndarray, list[_InEdges]]:
    """Every edge to the writer of its destination's part; each part's CSC, halo and edge
    features written. Returns the ``(P, E, 2)`` new edge-id ranges and this rank's edges."""
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    num_parts = layout.ranges.shape[0]
    n_total = graph.total_nodes
    received = []
    counts = np.zeros((num_parts, len(graph.edges)), np.int64)
    for e, etype in enumerate(graph.edges):
        hs, hd = share.homogeneous_edges(graph, e)
        ends = _unique_ids(n_total, hs, hd)
        new, part, piece = lookup(comm, *share.locate(ends),
                                  [layout.new, layout.part, layout.piece], budget=budget)
        # Where each end's answer is: a table over all ids (4 bytes a node) beats a binary
        # search of every end among the distinct ones.
        at = np.empty(n_total, np.int32 if len(ends) < 2**31 else np.int64)
        at[ends] = np.arange(len(ends), dtype=at.dtype)
        at_s, at_d = at[hs], at[hd]
        del ends, at
        a, b = share.edge_range(e)
        feats = graph.edata.get(etype, {})
        cols = [new[at_d], new[at_s], hd.astype(id_dtype(n_total)),
                np.arange(a, b, dtype=edge_id_dtype(graph.num_edges(etype), graph.num_nodes[etype[2]]))]
        if trainer_ids:
            cols.append(piece[at_d])  # as DGL: an edge goes to its destination's trainer
        cols += [np.asarray(f[a:b]) for f in feats.values()]
        got, _ = exchange(comm, writer_of(part[at_d], share.size), cols, budget=budget)
        del cols, new, part, piece, hs, hd
        dst_new, src_new, dst_old, eid_old = got[:4]
        order = _order_by(dst_new, eid_old, n_total, graph.num_edges(etype))
        got = [g[order] for g in got]
        del order
        d = tid[etype[2]]
        for p in mine:
            lo, hi = np.searchsorted(got[0], layout.ranges[p, d], side="left")
            counts[p, e] = hi - lo
        received.append((got, feats))
    counts = comm.allreduce(counts)  # each part's counts come from its writer only
    block_start = np.concatenate([[0], np.cumsum(counts.reshape(-1))[:-1]]).reshape(counts.shape)
    edge_ranges = np.stack([block_start, block_start + counts], axis=-1)

    index = id_dtype(n_total)
    kept: list[_InEdges] = []
    halo: dict[int, list[np.ndarray]] = {p: [] for p in mine}
    cut = {p: 0 for p in mine}
    for e, (etype, (got, feats)) in enumerate(zip(graph.edges, received, strict=True)):
        dst_new, src_new, dst_old, eid_old = got[:4]
        trainer: np.ndarray | None = got[4] if trainer_ids else None
        rows = got[5 if trainer_ids else 4:]
        d = tid[etype[2]]
        key = etype_key(etype)
        eid_type = edge_id_dtype(graph.num_edges(etype), graph.num_nodes[etype[2]])
        eid_new = np.empty(len(dst_new), out_index_dtype(graph))
        for p in mine:
            lo, hi = np.searchsorted(dst_new, layout.ranges[p, d], side="left")
            owned_lo, owned_hi = int(layout.ranges[p, 0, 0]), int(layout.ranges[p, -1, 1])
            num_dst = int(layout.ranges[p, d, 1] - layout.ranges[p, d, 0])
            indptr = np.zeros(num_dst + 1, np.int64)
            np.cumsum(np.bincount(dst_new[lo:hi] - layout.ranges[p, d, 0], minlength=num_dst),
                      out=indptr[1:])
            indices: np.ndarray = src_new[lo:hi].astype(index)
            outside = (indices < owned_lo) | (indices >= owned_hi)
            cut[p] += int(np.count_nonzero(outside))
            if halo_hops:
                halo[p].append(src_new[lo:hi][outside])
            entry = written.entries[p]
            entry["csc"][key] = {
                "indptr": writer.save(f"part{p}/graph/{e}_indptr.npy", indptr),
                "indices": writer.save(f"part{p}/graph/{e}_indices.npy", indices),
            }
            if feats or trainer is not None:
                files = entry.setdefault("edge_feat_files", {})
                for name, values in zip(feats, rows, strict=True):
                    rel = f"part{p}/edge_feat/{e}_{safe_name(name)}.npy"
                    files[f"{key}/{name}"] = writer.save(rel, values[lo:hi])
                if trainer is not None:
                    files[f"{key}/trainer_id"] = writer.save(
                        f"part{p}/edge_feat/{e}_trainer_id.npy", trainer[lo:hi].astype(np.int64))
            written.orig_eids[(e, p)] = eid_old[lo:hi].astype(eid_type)
            eid_new[lo:hi] = edge_ranges[p, e, 0] + np.arange(hi - lo)
        kept.append(_InEdges(src_new, dst_new, dst_old, eid_old, eid_new))
        received[e] = None  # type: ignore[call-overload]
    for p in mine:
        entry = written.entries[p]
        num_halo: list[int] = []
        if halo_hops:
            hop1 = _unique_ids(n_total, *halo[p])
            num_halo.append(len(hop1))
            entry["halo_nids"] = writer.save(f"part{p}/halo_nids.npy", hop1)
        entry["num_halo_per_hop"] = num_halo
        written.stats[p] = PartStats(int(layout.ranges[p, -1, 1] - layout.ranges[p, 0, 0]),
                                     int(counts[p].sum()), cut[p], num_halo)
    return edge_ranges, kept


def _order_by(major: np.ndarray, minor: np.ndarray, major_count: int,
              minor_count: int) -> np.ndarray:
    """The order of rows by ``(major, minor)`` (values below the counts): one sort of a
    combined key where it fits 63 bits, else a lexsort."""
    if major_count * minor_count < 2**63:
        return np.argsort(major.astype(np.int64) * minor_count + minor)  # keys are distinct
    return np.lexsort((minor, major))


def _unique_ids(total: int, *ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``ids`` (all in ``[0, total)``): a mark per id, one
    linear pass (a sort of the ends would be O(m log m))."""
    mark = np.zeros(total, bool)
    for a in ids:
        mark[a] = True
    return np.flatnonzero(mark)


def _out_edges(comm: Any, graph: Graph, layout: _Layout, edge_ranges: np.ndarray,
               in_edges: list[_InEdges], mine: list[int], writer: ShardWriter,
               written: _Written, budget: int) -> None:
    """Every edge on to the writer of its source's part, which writes the out-CSR: rows over
    the part's nodes of the source type, each row in (input destination, input edge id)
    order, as :func:`partitioner.relabel.presort_out_edges` orders it."""
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    offsets = graph.node_offsets()
    index = out_index_dtype(graph)
    size = comm.Get_size()
    for e, (etype, ie) in enumerate(zip(graph.edges, in_edges, strict=True)):
        cols = [ie.src_new, ie.dst_old, ie.eid_old, ie.dst_new, ie.eid_new]
        (src_new, dst_old, eid_old, dst_new, eid_new), _ = exchange(
            comm, writer_of(layout.part_of_new(ie.src_new), size), cols, budget=budget)
        m = graph.num_edges(etype)
        nd = graph.num_nodes[etype[2]]
        # Rows by source, each in (input destination, input edge id) order.
        within = _order_by(dst_old - offsets[tid[etype[2]]], eid_old, nd, m)
        order = within[np.argsort(src_new[within], kind="stable")]
        del within
        src_new, dst_new, eid_new = src_new[order], dst_new[order], eid_new[order]
        s = tid[etype[0]]
        for p in mine:
            lo, hi = np.searchsorted(src_new, layout.ranges[p, s], side="left")
            rows = int(layout.ranges[p, s, 1] - layout.ranges[p, s, 0])
            indptr = np.zeros(rows + 1, index)
            np.cumsum(np.bincount(src_new[lo:hi] - layout.ranges[p, s, 0], minlength=rows),
                      out=indptr[1:])
            prefix = f"part{p}/graph"
            written.entries[p].setdefault("csr", {})[etype_key(etype)] = {
                "indptr": writer.save(f"{prefix}/{e}_out_indptr.npy", indptr),
                "indices": writer.save(f"{prefix}/{e}_out_indices.npy", dst_new[lo:hi]
                                       .astype(index)),
                "eids": writer.save(f"{prefix}/{e}_out_eids.npy", eid_new[lo:hi].astype(index)),
            }


def _original_ids(comm: Any, graph: Graph, num_parts: int, writer: ShardWriter,
                  written: _Written) -> dict[str, Any]:
    """Rank 0 writes ``orig_nids`` / ``orig_eids``, receiving each part's ids from its writer
    in part order (every writer sends its parts in that same order: no cycle of waits)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    jobs: list[tuple[str, str, int, np.dtype, int, dict[tuple[int, int], np.ndarray]]] = []
    for t, ntype in enumerate(graph.ntypes):
        jobs.append(("orig_nids", ntype, t, np.dtype(np.int64), graph.num_nodes[ntype],
                     written.orig_nids))
    for e, etype in enumerate(graph.edges):
        jobs.append(("orig_eids", etype_key(etype), e, np.dtype(edge_id_dtype(graph.num_edges(etype), graph.num_nodes[etype[2]])),
                     graph.num_edges(etype), written.orig_eids))
    result: dict[str, Any] = {"orig_nids": {}, "orig_eids": {}}
    for kind, key, k, dtype, length, pieces in jobs:
        if rank == 0:
            def blocks(k: int = k, dtype: np.dtype = dtype,
                       pieces: dict[tuple[int, int], np.ndarray] = pieces) -> Iterator[np.ndarray]:
                for p in range(num_parts):
                    w = writer_of(p, size)
                    yield pieces.pop((k, p)) if w == 0 else recv_array(comm, w, dtype)
            rel = f"{kind}/{k}_{safe_name(key)}.npy"
            result[kind][key] = writer.save_blocks(rel, dtype, (length,), blocks())
        else:
            for p in range(num_parts):
                if writer_of(p, size) == rank:
                    send_array(comm, pieces.pop((k, p)).astype(dtype, copy=False), 0)
    return result


def send_array(comm: Any, array: np.ndarray, dest: int, *, budget: int = DEFAULT_BUDGET) -> None:
    """Send a 1-D array to ``dest`` in messages of at most ``budget`` bytes (see
    :func:`recv_array`)."""
    array = np.ascontiguousarray(array)
    comm.send(len(array), dest=dest, tag=_TAG)
    step = max(1, budget // max(1, array.itemsize))
    for a in range(0, len(array), step):
        comm.Send(array[a:a + step], dest=dest, tag=_TAG)


def recv_array(comm: Any, source: int, dtype: np.dtype, *,
               budget: int = DEFAULT_BUDGET) -> np.ndarray:
    """Receive what :func:`send_array` sent from ``source`` (same ``dtype`` and budget)."""
    length = comm.recv(source=source, tag=_TAG)
    out = np.empty(length, dtype)
    step = max(1, budget // max(1, out.itemsize))
    for a in range(0, length, step):
        comm.Recv(out[a:a + step], source=source, tag=_TAG)
    return out


def _train_counts(comm: Any, graph: Graph, share: Share, layout: _Layout,
                  num_parts: int) -> np.ndarray:
    """Training nodes per part, summed over the ranks' blocks."""
    train = np.zeros(num_parts, np.int64)
    for t, lo, hi, at in share.type_slices():
        mask = graph.ndata.get(graph.ntypes[t], {}).get("train_mask")
        if mask is not None and hi > lo:
            sel = np.asarray(mask[lo:hi]).astype(bool)
            train += np.bincount(layout.part[at:at + hi - lo][sel], minlength=num_parts)
    return np.asarray(comm.allreduce(train))


def _save_assignment(comm: Any, share: Share, part: np.ndarray, num_nodes: int,
                     path: str | Path) -> None:
    """Rank 0 writes every node's part (each rank's nodes and parts sent to it in turn)."""
    if comm.Get_rank() != 0:
        send_array(comm, share.homogeneous_ids(), 0)
        send_array(comm, part.astype(np.int64), 0)
        return
    whole = np.full(num_nodes, -1, np.int64)
    whole[share.homogeneous_ids()] = part
    for r in range(1, comm.Get_size()):
        ids = recv_array(comm, r, np.dtype(np.int64))
        whole[ids] = recv_array(comm, r, np.dtype(np.int64))
    write_assignment(path, whole)
