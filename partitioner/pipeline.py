"""``partition_graph``: assignment, relabeling, halo and atomic write of a partition folder."""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import __version__
from .assignment import METHOD as ASSIGNMENT
from .assignment import given_assignment, pieces_of, write_assignment
from .balance import balance_weights
from .errors import OutputWriteError, PartitionOptionError
from .format import (
    FORMAT_VERSION,
    PartConfig,
    ShardWriter,
    atomic_output_dir,
    format_bytes,
    free_disk_beside,
    safe_name,
    write_config,
)
from .graph import Graph, etype_key
from .inputs import as_graph
from .memory import drop_mapped_pages, prefault, release_free_memory, retained_heap
from .memory_plan import GraphShape, PartitionPlan, plan_partition
from .methods import INT32_MAX, METHODS, GraphFile, assign_parts, choose_method
from .parallel import submit, submit_after
from .paths import name_problem
from .relabel import (
    OutPartsJob,
    PresortedEdges,
    presort_edges,
    presort_out_edges,
    relabel_nodes,
    sort_edges,
)
from .report import quality_report
from .shards import write_out_part, write_part
from .symmetric import symmetric_csr

# The symmetric graph of the lean regime, in the output's temporary folder until assign ends.
_GRAPH_FILE = ".symmetric.parhip"
# Memory faulted in beside METIS, per input edge: about what METIS's work arrays and the relabel
# buffers take on top of what the symmetrize left free (measured on 1M nodes / 20M edges).
_PREFAULT_BYTES_PER_EDGE = 32


class ProgressReporter(Protocol):
    """Receives phase starts and ends; the CLI renders them, the library stays silent."""

    def phase_start(self, name: str, detail: str) -> None: ...

    def phase_end(self, name: str, seconds: float, rate: str = "") -> None: ...

    def note(self, text: str) -> None: ...


class _Silent:
    def phase_start(self, name: str, detail: str) -> None:
        pass

    def phase_end(self, name: str, seconds: float, rate: str = "") -> None:
        pass

    def note(self, text: str) -> None:
        pass


class _Phases:
    def __init__(self, reporter: ProgressReporter, edges: int) -> None:
        self.reporter = reporter
        self.edges = edges
        self.times: dict[str, float] = {}
        self.plan: PartitionPlan | None = None

    @contextlib.contextmanager
    def __call__(self, name: str, detail: str = "") -> Iterator[None]:
        expected = self.plan.phase_seconds(name) if self.plan is not None else 0.0
        if expected >= 5:  # a time estimate where the wait is worth one
            detail += f" (estimate ~{expected:.0f}s)"
        self.reporter.phase_start(name, detail)
        t0 = time.perf_counter()
        yield
        dt = time.perf_counter() - t0
        self.times[name] = self.times.get(name, 0.0) + dt
        if self.plan is not None and self.plan.lean:
            release_free_memory()
        self.reporter.phase_end(name, dt, edge_rate(self.edges, dt))


def edge_rate(edges: int, seconds: float) -> str:
    """``"12.3M edges/s"`` (``""`` for a phase too short to say)."""
    if seconds < 0.05 or edges <= 0:
        return ""
    per_s = edges / seconds
    return f"{per_s / 1e6:.1f}M edges/s" if per_s >= 1e6 else f"{per_s / 1e3:.0f}k edges/s"


@contextlib.contextmanager
def _drained(writer: ShardWriter) -> Iterator[None]:
    """On failure, let background writes finish before the temporary folder is removed."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            writer.wait()
        raise


@contextlib.contextmanager
def _joined(futures: list[Future]) -> Iterator[None]:
    """On failure, wait for ``futures`` (workers holding large arrays) before going on."""
    try:
        yield
    except BaseException:
        for future in futures:
            if not future.cancel():
                future.exception()
        raise


def partition_graph(
    graph: Any,
    graph_name: str,
    num_parts: int,
    out: str | Path | None = None,
    *,
    method: str = "metis",
    halo_hops: int = 1,
    balance_train: bool = True,
    balance_ntypes: Any = None,
    balance_edges: bool = False,
    objtype: str = "cut",
    imbalance: float = 1.03,
    seed: int = 0,
    trainers_per_machine: int = 1,
    out_edges: bool = True,
    overwrite: bool = False,
    reporter: ProgressReporter | None = None,
    memory_limit: int | None = None,
    regime: str = "auto",
    on_written: Callable[[], None] | None = None,
    return_mapping: bool = False,
    ndata: dict[str, Any] | None = None,
    edata: dict[str, Any] | None = None,
    num_nodes: int | None = None,
    assignment: str | Path | np.ndarray | None = None,
    save_assignment: str | Path | None = None,
    **dgl_names: Any,
) -> Any:
    """Partition ``graph`` into ``num_parts`` parts and write ``out/graph_name.json`` plus shards.

    ``graph`` is a :class:`Graph` or anything :func:`partitioner.inputs.as_graph` takes (a
    scipy sparse matrix, ``(src, dst)`` arrays, a PyG ``Data`` / ``HeteroData``). DGL's
    argument names work too: ``out_path`` (``out``), ``num_hops`` (``halo_hops``),
    ``part_method`` (``method``), ``num_trainers_per_machine`` (``trainers_per_machine``);
    ``graph_formats`` is accepted and ignored (parts are always CSC, plus the out-CSR);
    ``balance_ntypes`` may be DGL's array of one value per node as well as a node data name.
    ``ndata`` / ``edata`` give the features of a ``(src, dst)`` or scipy input, ``num_nodes``
    its node count (default: largest id + 1, as ``dgl.graph``).
    With ``out_edges`` (the default) every part also gets the out-CSR of the edges whose
    source it owns (``edge_dir="out"`` sampling and ``out_degrees`` need it); the CLI's
    ``--no-out-edges`` turns it off. Returns the part config that was written (the quality
    report is under ``"quality"``), or with ``return_mapping`` DGL's ``(orig_nids,
    orig_eids)``: int64 tensors of the input id of each new id (dicts per type for a
    heterograph). The folder appears only when complete; on any error nothing is left behind.

    ``memory_limit`` (bytes; default: what the machine has available) bounds the run's peak
    memory: the phases are planned to stay under it (:mod:`partitioner.memory_plan`), and a
    graph that cannot fit raises PartitionMemoryError before any work, with the estimates;
    ``regime`` (``"fast"``, ``"lean"``) takes one regardless. ``on_written`` is called the
    moment the output folder is in place (see :func:`partitioner.format.atomic_output_dir`).

    ``assignment`` (an array, or a file: :mod:`partitioner.assignment`) gives the part of
    every node, used as is instead of ``method`` (from any partitioner, or an earlier run);
    ``save_assignment`` writes the one this run used to that file (``.npy`` for a ``.npy``
    name, else text: :func:`partitioner.assignment.write_assignment`), once the partition is
    written.

    Node ids are relabeled so each part owns one range; with one part every node keeps its
    input id, but edge ids still follow the stored order (by destination): use ``orig_eids``.
    """
    given = {"out": out, "halo_hops": halo_hops, "method": method,
             "trainers_per_machine": trainers_per_machine}
    opts = _dgl_options(dgl_names, given, {"out": None, "halo_hops": 1, "method": "metis",
                                           "trainers_per_machine": 1})
    config = _partition(as_graph(graph, num_nodes, ndata, edata), graph_name, num_parts, opts["out"],
                        method=opts["method"], halo_hops=opts["halo_hops"],
                        balance_train=balance_train, balance_ntypes=balance_ntypes,
                        balance_edges=balance_edges, objtype=objtype, imbalance=imbalance,
                        seed=seed, trainers_per_machine=opts["trainers_per_machine"],
                        out_edges=out_edges, overwrite=overwrite, reporter=reporter,
                        memory_limit=memory_limit, regime=regime, on_written=on_written,
                        assignment=assignment, save_assignment=save_assignment)
    return orig_id_tensors(config) if return_mapping else config


_DGL_NAMES = {"out_path": "out", "num_hops": "halo_hops", "part_method": "method",
              "num_trainers_per_machine": "trainers_per_machine"}


def _dgl_options(dgl_names: dict[str, Any], given: dict[str, Any],
                 defaults: dict[str, Any]) -> dict[str, Any]:
    """Fold DGL's argument names into ours; a PartitionOptionError for an unknown name or
    for both names of one option given different values."""
    opts = dict(given)
    for name, value in dgl_names.items():
        if name == "graph_formats":
            continue
        ours = _DGL_NAMES.get(name)
        if ours is None:
            known = sorted([*_DGL_NAMES, "graph_formats", *given])
            raise PartitionOptionError(f"partition_graph() got an unknown argument {name!r}",
                                       hint=f"known: {', '.join(known)}")
        if opts[ours] != defaults[ours] and opts[ours] != value:
            raise PartitionOptionError(f"{name}={value!r} and {ours}={opts[ours]!r} disagree",
                                       hint="give one of the two names")
        opts[ours] = value
    if opts["out"] is None:
        raise PartitionOptionError("partition_graph() needs an output folder (out / out_path)")
    return opts


def orig_id_tensors(config: PartConfig) -> tuple[Any, Any]:
    """DGL's ``return_mapping`` value: ``(orig_nids, orig_eids)`` as int64 torch tensors, the
    input id of each new per-type id; dicts by node type / canonical edge type unless the
    graph has a single node type and a single edge type."""
    import torch

    from .loader import load_orig_ids

    nids, eids = load_orig_ids(config)
    nids = {k: torch.from_numpy(np.array(v, np.int64)) for k, v in nids.items()}
    eids = {k: torch.from_numpy(np.array(v, np.int64)) for k, v in eids.items()}
    if len(nids) == 1 and len(eids) == 1:
        return next(iter(nids.values())), next(iter(eids.values()))
    return nids, eids


def _partition(
    graph: Graph,
    graph_name: str,
    num_parts: int,
    out: str | Path,
    *,
    method: str,
    halo_hops: int,
    balance_train: bool,
    balance_ntypes: Any,
    balance_edges: bool,
    objtype: str,
    imbalance: float,
    seed: int,
    trainers_per_machine: int,
    out_edges: bool,
    overwrite: bool,
    reporter: ProgressReporter | None,
    memory_limit: int | None,
    regime: str,
    on_written: Callable[[], None] | None,
    assignment: str | Path | np.ndarray | None = None,
    save_assignment: str | Path | None = None,
) -> PartConfig:
    given = None
    if assignment is not None:
        method = ASSIGNMENT
    check_options(graph, graph_name, num_parts, method, halo_hops, objtype, imbalance,
                   trainers_per_machine)
    if assignment is not None:
        given = given_assignment(assignment, graph.total_nodes, num_parts)
    phases = _Phases(reporter or _Silent(), graph.total_edges)
    out = Path(out)
    n = graph.total_nodes
    num_pieces = num_parts * trainers_per_machine

    # A given assignment needs what a random one needs: no symmetric graph, no backend.
    plan = plan_partition(GraphShape.of(graph), method="random" if given is not None else method,
                          out_edges=out_edges, memory_limit=memory_limit, regime=regime)
    phases.reporter.note(plan.summary())
    phases.plan = plan
    _check_disk(out, plan)
    # Fast: the heap is kept across the phases and the presorts run beside the long phases.
    # Lean: every phase hands its free memory back as it ends (the heap is kept only within a
    # phase, where its temporaries reuse it) and reads the input's pages only while it needs
    # them (partitioner.memory), one large step at a time.
    with retained_heap(), atomic_output_dir(out, overwrite, on_written) as tmp:
        weights: np.ndarray | None = None
        weight_names: list[str] = []
        indptr = indices = None
        graph_file: GraphFile | None = None
        presort = out_presort = None
        presorted: list[PresortedEdges] | None = None
        try:
            if method not in ("random", ASSIGNMENT):
                if plan.presort_beside_symmetrize:
                    # The presort needs no assignment: it runs on a worker thread beside the
                    # symmetrize, so that METIS later has the machine to itself.
                    presort = submit(presort_edges, graph)
                with phases("symmetrize", f"{graph.total_edges:,} edges -> undirected CSR"):
                    src, dst = _homogeneous_edges(graph)
                    if plan.lean:
                        # The graph for the partitioner on disk: written through a mapping,
                        # then out of this process's memory (METIS maps it back as it
                        # reads; KaMinPar loads the file).
                        graph_file = GraphFile(tmp / _GRAPH_FILE, n)
                        indptr, indices = symmetric_csr(src, dst, n, drop_input_pages=True,
                                                        indices_into=graph_file.indices)
                        indices = graph_file.seal(indptr)
                    else:
                        indptr, indices = symmetric_csr(src, dst, n)
                    del src, dst
                    presorted = presort.result() if presort is not None else _presort(graph, plan)
                if method == "auto":
                    method, why = choose_method(int(indices.size),
                                                avoid_metis=plan.method_reason)
                    phases.reporter.note(f"method auto: {method} ({why})")
                weights, weight_names = balance_weights(
                    graph, balance_train=balance_train, balance_ntypes=balance_ntypes,
                    balance_edges=balance_edges, in_degrees=[p.deg for p in presorted],
                )
            detail = f"{num_pieces} parts"
            if weight_names:
                detail += f", balancing {', '.join(weight_names)}"
            if isinstance(assignment, (str, Path)):
                detail += f" from {assignment}"
            with phases("assign", f"{method}: {detail}"):
                warmed = None
                if method == "metis" and plan.prefault:
                    # METIS is single-threaded: the other core faults in the memory METIS and
                    # the phases after it will take (see memory.prefault).
                    warmed = prefault(_PREFAULT_BYTES_PER_EDGE * graph.total_edges)
                if out_edges and presorted is not None and plan.out_presort_beside_assign:
                    # ... and then groups the edges by input source for the out-edges.
                    out_presort = submit_after(warmed, presort_out_edges, graph, presorted)
                piece = pieces_of(given, trainers_per_machine) if given is not None else \
                    assign_parts(
                        method,
                        indptr if indptr is not None else np.zeros(n + 1, np.int32),
                        indices if indices is not None else np.zeros(0, np.int32), num_pieces,
                        vweights=weights, objtype=objtype, seed=seed, imbalance=imbalance,
                        lean=plan.lean, graph_file=graph_file,
                    )
                del indptr, indices
                if graph_file is not None:
                    graph_file.remove()  # before the folder becomes the output
                if presorted is None:
                    presorted = _presort(graph, plan)
                if out_edges and out_presort is None and not plan.lean:
                    out_presort = submit(presort_out_edges, graph, presorted)
        except BaseException:
            # Let the workers finish before the error goes on: they hold large arrays.
            for future in (presort, out_presort):
                if future is not None and not future.cancel():
                    future.exception()
            raise
        piece = np.asarray(piece, dtype=np.int64)
        part = piece // trainers_per_machine if trainers_per_machine > 1 else piece
        futures = [out_presort] if out_presort is not None else []  # pool work on large arrays
        out_by_part: OutPartsJob | None = None
        with _joined(futures):
            with phases("relabel", "contiguous id ranges per part and type"):
                nodes = relabel_nodes(graph, part, num_parts)
                if out_presort is not None:
                    # The out-edges of every part: a gather of whole rows on a worker, beside
                    # the CSC's sort and the writes.
                    futures.append(submit(OutPartsJob(graph, part, nodes, num_parts, presorted,
                                                      futures.pop().result())))
                sorted_edges, edge_ranges = sort_edges(graph, part, nodes, num_parts, presorted)
                if out_edges and plan.lean:
                    # After the CSC's sort, not beside it, and then one part at a time as it
                    # is written: one large step at a time.
                    out_by_part = OutPartsJob(graph, part, nodes, num_parts, presorted,
                                              presort_out_edges(graph, presorted),
                                              allocate=False)
                del presorted
            # The shards about to be written need page cache: give the kernel back the heap's
            # free (already faulted-in) memory to take it from.
            release_free_memory()
            writer = ShardWriter(tmp, background=True, output=out)
            config = base_config(graph, graph_name, num_parts, method, halo_hops, nodes.ranges,
                                  edge_ranges)
            part_stats = []
            detail = f"{num_parts} parts, halo {halo_hops} hop(s)"
            with phases("write", detail + (", out-edges" if out_edges else "")), _drained(writer):
                for p in range(num_parts):
                    entry, stats = write_part(
                        writer, p, graph, nodes, sorted_edges, edge_ranges, halo_hops,
                        piece if trainers_per_machine > 1 else None, drop_pages=plan.lean,
                    )
                    config[f"part-{p}"] = entry
                    part_stats.append(stats)
                if out_by_part is not None:
                    for p in range(num_parts):
                        config[f"part-{p}"]["csr"] = write_out_part(writer, p, graph,
                                                                    out_by_part.part(p))
                        writer.wait()  # the part's buffers go once written
                    out_by_part = None
                elif out_edges:
                    out_parts = futures.pop().result()
                    for p in range(num_parts):
                        config[f"part-{p}"]["csr"] = write_out_part(writer, p, graph,
                                                                    out_parts[p])
                    del out_parts
                config["orig_nids"] = {
                    t: writer.save(f"orig_nids/{i}_{safe_name(t)}.npy", nodes.orig[i])
                    for i, t in enumerate(graph.ntypes)
                }
                config["orig_eids"] = {
                    etype_key(et): writer.save(f"orig_eids/{i}_{safe_name(etype_key(et))}.npy",
                                               se.order)
                    for i, (et, se) in enumerate(zip(graph.edges, sorted_edges, strict=True))
                }
                writer.wait()
        config.update(
            {
                "num_trainers_per_machine": trainers_per_machine,
                "balance": weight_names,
                "objtype": objtype if method == "metis" else None,
                "imbalance": imbalance,
                "seed": seed,
                "feature_schema": feature_schema(graph, trainers_per_machine > 1),
                "files": dict(sorted(writer.files.items())),
            }
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        config["quality"] = quality_report(graph, part, part_stats, phases.times, peak)
        write_config(tmp / f"{graph_name}.json", config)
    if save_assignment is not None:
        write_assignment(save_assignment, part)
    return PartConfig(config, out / f"{graph_name}.json")


def _check_disk(out: Path, plan: PartitionPlan) -> None:
    """Refuse before any work when the output's estimated size exceeds the free disk space."""
    parent, free = free_disk_beside(out)
    if free is None:
        return  # unknown: the writes will say so if the disk fills
    if plan.disk_bytes > free:
        raise OutputWriteError(
            f"{out}: the partition needs an estimated {format_bytes(plan.disk_bytes)} of disk, "
            f"{parent} has {format_bytes(free)} free",
            hint="free some space, or give --out on a larger disk", path=str(out),
            needed=plan.disk_bytes)


def _presort(graph: Graph, plan: PartitionPlan) -> list[PresortedEdges]:
    """The presort on this thread; in the lean regime the edge input's pages leave the
    resident set afterwards (nothing reads them again but the trainer ids' lookup)."""
    presorted = presort_edges(graph)
    if plan.lean:
        for src, dst in graph.edges.values():
            drop_mapped_pages(src)
            drop_mapped_pages(dst)
    return presorted


def check_options(
    graph: Graph, graph_name: str, num_parts: int, method: str, halo_hops: int, objtype: str,
    imbalance: float, trainers_per_machine: int,
) -> None:
    """Refuse options that cannot make a partition, before any work (PartitionOptionError)."""
    why = name_problem(graph_name)  # the rule read_config applies: a name it can read back
    if why:
        raise PartitionOptionError(
            f"graph name {graph_name!r}: {why}",
            hint="it names the JSON file and the shared memory of the job",
        )
    if num_parts < 1:
        raise PartitionOptionError(f"--num-parts must be at least 1, got {num_parts}")
    if num_parts * trainers_per_machine > graph.total_nodes:
        raise PartitionOptionError(
            f"--num-parts {num_parts} x --trainers-per-machine {trainers_per_machine} exceeds the "
            f"number of nodes ({graph.total_nodes})"
        )
    if method not in (*METHODS, "auto", ASSIGNMENT):
        raise PartitionOptionError(f"unknown method {method!r}; choose one of "
                                   f"{', '.join((*METHODS, 'auto'))}")
    if method not in ("random", ASSIGNMENT) and graph.total_nodes > INT32_MAX:
        # Before the symmetrize and the presort allocate anything for that many nodes.
        raise PartitionOptionError(
            f"{graph.total_nodes:,} nodes do not fit the 32-bit node ids of {method} (at most "
            f"{INT32_MAX:,})", hint="use --method random (it has no such limit), or partition "
                                   "a smaller graph")
    if halo_hops not in (0, 1, 2):
        raise PartitionOptionError(f"--halo-hops must be 0, 1 or 2, got {halo_hops}")
    if objtype not in ("cut", "vol"):
        raise PartitionOptionError(f"--objtype must be 'cut' or 'vol', got {objtype!r}")
    if not 1.0 < imbalance <= 2.0:
        raise PartitionOptionError(f"--imbalance must be in (1.0, 2.0], got {imbalance}")
    if trainers_per_machine < 1:
        raise PartitionOptionError(
            f"--trainers-per-machine must be at least 1, got {trainers_per_machine}"
        )


def _homogeneous_edges(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    offsets = graph.node_offsets()
    tid = {t: i for i, t in enumerate(graph.ntypes)}
    if len(graph.edges) == 1:
        ((etype, (src, dst)),) = graph.edges.items()
        if offsets[tid[etype[0]]] == 0 and offsets[tid[etype[2]]] == 0:
            return src, dst  # already homogeneous ids: no copy
    src = np.concatenate([offsets[tid[et[0]]] + s for et, (s, _) in graph.edges.items()])
    dst = np.concatenate([offsets[tid[et[2]]] + d for et, (_, d) in graph.edges.items()])
    return src, dst


def base_config(
    graph: Graph, graph_name: str, num_parts: int, method: str, halo_hops: int,
    node_ranges: np.ndarray, edge_ranges: np.ndarray,
) -> dict[str, Any]:
    """The part config's keys that describe the graph and its id ranges (DGL's among them)."""
    return {
        "graph_name": graph_name,
        "num_nodes": graph.total_nodes,
        "num_edges": graph.total_edges,
        "part_method": method,
        "num_parts": num_parts,
        "halo_hops": halo_hops,
        "node_map": {t: node_ranges[:, i].tolist() for i, t in enumerate(graph.ntypes)},
        "edge_map": {etype_key(et): edge_ranges[:, i].tolist() for i, et in enumerate(graph.edges)},
        "ntypes": {t: i for i, t in enumerate(graph.ntypes)},
        "etypes": {etype_key(et): i for i, et in enumerate(graph.edges)},
        "format_version": FORMAT_VERSION,
        "created_by": f"dglctl {__version__}",
        "num_nodes_per_type": dict(graph.num_nodes),
        "num_edges_per_type": {etype_key(et): graph.num_edges(et) for et in graph.edges},
    }


def feature_schema(graph: Graph, with_trainer_id: bool) -> dict[str, Any]:
    """Dtype and row shape of every node and edge feature a part holds."""
    node = {
        f"{t}/{name}": {"dtype": arr.dtype.str, "shape": list(arr.shape[1:])}
        for t, feats in graph.ndata.items()
        for name, arr in feats.items()
    }
    if with_trainer_id:
        for t in graph.ntypes:
            node[f"{t}/trainer_id"] = {"dtype": np.dtype(np.int64).str, "shape": []}
    edge = {
        f"{etype_key(et)}/{name}": {"dtype": arr.dtype.str, "shape": list(arr.shape[1:])}
        for et, feats in graph.edata.items()
        for name, arr in feats.items()
    }
    if with_trainer_id:
        for et in graph.edges:
            edge[f"{etype_key(et)}/trainer_id"] = {"dtype": np.dtype(np.int64).str, "shape": []}
    return {"node": node, "edge": edge}
