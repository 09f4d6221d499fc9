"""How a partition run will use memory, disk and time, planned before any work.

``plan_partition`` estimates the peak memory of each phase of :func:`partition_graph` in its
two regimes (:mod:`partitioner.memory`): *fast* keeps the heap across the phases and overlaps
the presorts with the long phases; *lean* hands memory back after every phase, reads the
input's mapped pages only while a phase needs them and copies features in row blocks. The
fast regime is taken when its estimate fits the memory limit (default: what the machine has
available), the lean one when only it fits; when neither does, :class:`PartitionMemoryError`
says so before anything is read twice or written, with the estimate of every phase.

The estimates count the arrays each phase holds at its peak, per directed edge and per node,
with coefficients measured by ``bench/partition_scaling.py`` on generated graphs (average
degree 20, 10M-200M directed edges; docs/benchmarks.md), which prints each estimate beside
the peak it measures. They are estimates, not bounds: the lean regime's are close to the
measured peaks, the fast regime's are on the high side (its kept heap makes its peak depend
on the order of frees). Resident input pages count for the phases that read them: in the
fast regime all of them, since nothing drops them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import PartitionMemoryError, PartitionOptionError
from .format import format_bytes
from .graph import Graph
from .memory import available_memory, mapping_of

PHASES = ("read", "symmetrize", "assign", "relabel", "write")
REGIMES = ("auto", "fast", "lean")

# The interpreter, numpy, scipy's kernels and libmetis loaded, before any array (measured:
# the read-only child of bench.partition_scaling less its input).
_BASE_BYTES = 45 << 20
# Anonymous bytes each phase holds at its peak, per directed edge (beyond the per-node arrays
# below), with 32-bit ids (twice that with 64-bit ones), with out-edges, measured by
# bench.partition_scaling at 50M and 200M directed edges (degree 20, 4 parts, METIS).
# Lean: within a few percent of the measured peaks. Fast: an upper figure: its kept heap and
# prefault make the assign and relabel peaks depend on the order of frees (measured 62-86 and
# 67-82 per edge).
_FAST_PER_EDGE = {"read": 0.0, "symmetrize": 39.0, "assign": 89.0, "relabel": 79.0,
                  "write": 38.0}
_LEAN_PER_EDGE = {"read": 0.0, "symmetrize": 23.0, "assign": 49.5, "relabel": 35.0,
                  "write": 28.0}
# The lean write's part that does not grow with the graph: feature row blocks in flight on the
# writer threads and the input pages they read, at most the features themselves (measured:
# 0.28 GB over the per-edge figure at 10M edges, with 0.26 GB of features; within the
# per-edge figure at 50M and 200M).
_LEAN_WRITE_BYTES = 0.28e9
# Per node: CSR pointers, degrees, METIS's per-node arrays, the relabel's id maps.
_PER_NODE = {"read": 0.0, "symmetrize": 16.0, "assign": 60.0, "relabel": 56.0, "write": 56.0}
# What out-edges add: the out-presort (beside assign in the fast regime, after the CSC's sort
# in the lean one) and the out-CSR buffers (all parts at once in the fast regime, one part at a
# time as it is written in the lean one).
_OUT_EDGES_PER_EDGE = {"fast": {"assign": 12.0, "relabel": 16.0, "write": 8.0},
                       "lean": {"relabel": 10.0, "write": 8.0}}
# METIS's own work arrays on top of the symmetric graph, per directed edge (part of assign);
# KaMinPar's (its 64-bit graph and work arrays), and what its allocator keeps afterwards.
_METIS_PER_EDGE = 20.0
# ... and on a graph it cannot coarsen (a uniform random graph: 6M edges, 300k nodes, its run
# peaked at 150 bytes per edge against the model's 58): ~100, five times the term above.
_METIS_WORST_PER_EDGE = 100.0
_KAMINPAR_PER_EDGE = 13.0
_KAMINPAR_KEPT_PER_EDGE = 6.0
# The lean regime's assign with KaMinPar: the symmetric graph is a file KaMinPar loads into its
# compressed form, nothing of it in this process; the presort and KaMinPar's arrays. Measured
# 44.5, 37.4 and 19.1 bytes per edge in all at 10M, 50M and 200M edges (its compression gains
# with size): the figure below is the upper one. Its allocator keeps up to ~0.3 GB for the
# phases after (measured 0.11 GB at 10M, 11 bytes per edge; 0.30 GB at 50M; none at 200M).
_KAMINPAR_LEAN_ASSIGN_PER_EDGE = 37.0
_KAMINPAR_LEAN_KEPT_BYTES = 0.3e9
_KAMINPAR_LEAN_KEPT_PER_EDGE = 11.0
# Bytes per directed edge and per node of the output folder with 32-bit ids: CSC indices, edge
# ids (orig_eids), the out-CSR's indices and eids (4 B each), pointers and node ids (measured:
# 8.67 GB for 200M edges in 2 parts, 2 % under this estimate).
_DISK_PER_EDGE = 16.0
_DISK_PER_NODE = 40.0
# Wall seconds per directed edge on the measured 2-core machine, fast regime, at 50M edges;
# METIS grows a little faster than the edges (x5.7 from 50M to 200M): the 1/4 power below.
_SECONDS_PER_EDGE = 0.386e-6
_SECONDS_REFERENCE_EDGES = 50e6
_LEAN_TIME_FACTOR = 1.2
# Each phase's share of a METIS run's time (200M edges, both regimes within a few points).
_PHASE_TIME_SHARE = {"read": 0.01, "symmetrize": 0.16, "assign": 0.63, "relabel": 0.1,
                     "write": 0.1}
_KAMINPAR_TIME_FACTOR = 1.35  # on 2 cores; it scales with cores, METIS does not
_RANDOM_TIME_FACTOR = 0.3  # no symmetrize, no assign
_INT32_IDS = 2**31 - 1


@dataclass(frozen=True)
class GraphShape:
    """What the plan needs to know of a graph: sizes, and which arrays are file-mapped.

    Attributes:
        nodes, edges: total node and directed edge counts over all types.
        edge_bytes: bytes of the input's edge arrays (src and dst of every type).
        node_feature_bytes, edge_feature_bytes: bytes of the input's node / edge data.
        mapped_bytes: how many of those bytes are read-only file mappings (the rest is heap
            memory the reader filled, resident for the whole run).
    """

    nodes: int
    edges: int
    edge_bytes: int
    node_feature_bytes: int
    edge_feature_bytes: int
    mapped_bytes: int

    @classmethod
    def of(cls, graph: Graph) -> GraphShape:
        """The shape of ``graph`` as a reader returned it (nothing is read)."""
        arrays = graph.arrays()
        edge_arrays, node_feats, edge_feats = arrays["edges"], arrays["ndata"], arrays["edata"]
        every = edge_arrays + node_feats + edge_feats
        return cls(
            nodes=graph.total_nodes, edges=graph.total_edges,
            edge_bytes=sum(a.nbytes for a in edge_arrays),
            node_feature_bytes=sum(a.nbytes for a in node_feats),
            edge_feature_bytes=sum(a.nbytes for a in edge_feats),
            mapped_bytes=sum(a.nbytes for a in every if mapping_of(a) is not None),
        )

    @property
    def input_bytes(self) -> int:
        """Every array of the input."""
        return self.edge_bytes + self.node_feature_bytes + self.edge_feature_bytes

    @property
    def heap_input_bytes(self) -> int:
        """Input bytes the reader holds in memory (compressed or text inputs)."""
        return self.input_bytes - self.mapped_bytes


@dataclass(frozen=True)
class PartitionPlan:
    """The regime of a run and its estimates.

    Attributes:
        lean: hand memory back after each phase, drop mapped input pages once read, no prefault,
            no overlaps (the fast regime's, each costing memory while it runs).
        memory_limit: the bound planned for, in bytes.
        phases: estimated peak bytes of each phase in the chosen regime.
        fast_estimate, lean_estimate: estimated whole-run peak of each regime.
        disk_bytes: estimated size of the output folder.
        seconds: estimated wall time on the measured 2-core machine.
        reason: why this regime, in words.
        method: the backend the estimates are for (``--method auto``: the likely one).
        method_reason: why ``auto`` takes KaMinPar where METIS could go (METIS's worst case
            exceeds the memory limit), or None.
    """

    lean: bool
    memory_limit: int
    phases: dict[str, int]
    fast_estimate: int
    lean_estimate: int
    disk_bytes: int
    seconds: float
    reason: str
    shape: GraphShape = field(repr=False)
    method: str = "metis"
    method_reason: str | None = None

    @property
    def presort_beside_symmetrize(self) -> bool:
        """Fast: the presort runs on a worker beside the symmetrize."""
        return not self.lean

    @property
    def out_presort_beside_assign(self) -> bool:
        """Fast: the out-edges' presort runs beside METIS (lean: after the CSC's sort)."""
        return not self.lean

    @property
    def prefault(self) -> bool:
        """Fast: an idle core faults in the memory METIS and later phases will take."""
        return not self.lean

    @property
    def peak(self) -> int:
        """Estimated whole-run peak of the chosen regime."""
        return max(self.phases.values())

    def phase_seconds(self, phase: str) -> float:
        """Estimated seconds of one phase (its share of the run, as measured at 200M edges)."""
        return self.seconds * _PHASE_TIME_SHARE.get(phase, 0.0)

    @property
    def regime(self) -> str:
        """``"lean"`` or ``"fast"``."""
        return "lean" if self.lean else "fast"

    def summary(self) -> str:
        """One line for the progress output."""
        return (f"memory plan: {self.regime} ({self.reason}); estimated peak "
                f"{format_bytes(self.peak)}, output {format_bytes(self.disk_bytes)}, "
                f"~{self.seconds:.0f}s")

    def to_json(self) -> dict[str, Any]:
        """The plan for ``dglctl partition --estimate --json``."""
        return {
            "regime": self.regime, "reason": self.reason, "memory_limit": self.memory_limit,
            "method": self.method, "method_reason": self.method_reason,
            "peak_bytes": self.peak, "phases": dict(self.phases),
            "fast_peak_bytes": self.fast_estimate, "lean_peak_bytes": self.lean_estimate,
            "disk_bytes": self.disk_bytes, "seconds": round(self.seconds, 1),
            "nodes": self.shape.nodes, "edges": self.shape.edges,
            "input_bytes": self.shape.input_bytes, "mapped_input_bytes": self.shape.mapped_bytes,
        }


def phase_estimates(shape: GraphShape, *, lean: bool, method: str = "metis",
                    out_edges: bool = True) -> dict[str, int]:
    """Estimated peak bytes of each phase of a run on ``shape`` in one regime (``method``
    ``"auto"`` as the backend it will likely take, :func:`likely_method`)."""
    method = likely_method(method, shape)
    m, n = shape.edges, shape.nodes
    per_edge = _LEAN_PER_EDGE if lean else _FAST_PER_EDGE
    out: dict[str, int] = {}
    for phase in PHASES:
        if method == "random" and phase == "symmetrize":
            out[phase] = 0
            continue
        anon = per_edge[phase] * m + _PER_NODE[phase] * n
        if method == "random" and phase == "assign":
            anon = _PER_NODE[phase] * n + 8.0 * m  # the presort only
        elif phase == "assign" and method == "kaminpar" and lean:
            anon = _KAMINPAR_LEAN_ASSIGN_PER_EDGE * m + _PER_NODE[phase] * n
        elif phase == "assign" and method == "kaminpar":
            anon += (_KAMINPAR_PER_EDGE - _METIS_PER_EDGE) * m
        elif phase in ("relabel", "write") and method == "kaminpar":
            anon += (min(_KAMINPAR_LEAN_KEPT_BYTES, _KAMINPAR_LEAN_KEPT_PER_EDGE * m) if lean
                     else _KAMINPAR_KEPT_PER_EDGE * m)
        if lean and phase == "write":
            anon += min(_LEAN_WRITE_BYTES, shape.node_feature_bytes + shape.edge_feature_bytes)
        if not out_edges:
            anon -= _OUT_EDGES_PER_EDGE["lean" if lean else "fast"].get(phase, 0.0) * m
        if phase == "symmetrize" and m > _INT32_IDS:
            anon += 16.0 * m  # a thread's slice past 2**31 entries sorts 64-bit positions
        if max(m, n) > _INT32_IDS:
            anon *= 2.0  # 64-bit edge or node ids: every id array doubles
        resident = shape.heap_input_bytes
        mapped_edges = min(shape.edge_bytes, shape.mapped_bytes)
        mapped_feats = shape.mapped_bytes - mapped_edges
        if lean:
            # Edge pages while symmetrize/presort read them; feature pages one block at a time.
            resident += mapped_edges if phase in ("read", "symmetrize") else 0
        else:
            resident += mapped_edges
            resident += mapped_feats if phase == "write" else 0
        out[phase] = int(_BASE_BYTES + max(anon, 0.0) + resident)
    return out


def likely_method(method: str, shape: GraphShape) -> str:
    """The backend ``--method auto`` will likely take for ``shape``: KaMinPar when the symmetric
    graph can pass METIS's 32-bit ids (over 2**31 - 1 entries: up to two per directed edge),
    else METIS. Known for sure only after the symmetrize (``methods.choose_method``)."""
    if method != "auto":
        return method
    return "kaminpar" if 2 * shape.edges > _INT32_IDS else "metis"


def estimate_seconds(edges: int, *, lean: bool, method: str = "metis") -> float:
    """Estimated wall time of a run on ``edges`` directed edges on the measured 2-core machine
    (more, faster cores take less: METIS itself is serial, KaMinPar uses every core)."""
    scale = (max(edges, 1) / _SECONDS_REFERENCE_EDGES) ** 0.25
    factor = (_LEAN_TIME_FACTOR if lean else 1.0) * (_KAMINPAR_TIME_FACTOR
                                                     if method == "kaminpar" else 1.0)
    if method == "random":
        factor *= _RANDOM_TIME_FACTOR
    return _SECONDS_PER_EDGE * edges * scale * factor


def plan_partition(shape: GraphShape, *, method: str = "metis", out_edges: bool = True,
                   memory_limit: int | None = None, regime: str = "auto") -> PartitionPlan:
    """Choose the regime of a run on ``shape`` under ``memory_limit`` (bytes; None: what the
    machine has available now) and estimate its peak memory, disk and time. The part count
    and the halo move the figures by little and are not modelled.

    ``regime`` ``"fast"`` or ``"lean"`` takes that regime whatever the estimates say (the
    benchmark compares them; a user may want lean on a shared machine); ``"auto"`` chooses.

    Raises:
        PartitionMemoryError: with ``"auto"``, neither regime's estimate fits; the message has
            the lean one by phase.
        PartitionOptionError: an unknown ``regime``.
    """
    if regime not in REGIMES:
        raise PartitionOptionError(f"unknown regime {regime!r}; choose one of "
                                   f"{', '.join(REGIMES)}")
    limit = int(memory_limit) if memory_limit is not None else available_memory()
    where = "--memory-limit" if memory_limit is not None else "available memory"
    likely, method_reason = likely_method(method, shape), None
    if method == "auto" and likely == "metis" and limit > 0:
        worst = metis_worst_case(shape, out_edges=out_edges)
        if worst > limit:
            likely, method_reason = "kaminpar", (
                f"METIS's memory depends on the graph's structure: its lean run could need "
                f"{format_bytes(worst)} on a graph it cannot coarsen, more than {where} "
                f"{format_bytes(limit)}; KaMinPar's does not (--method metis to insist)")
    method = likely
    fast = phase_estimates(shape, lean=False, method=method, out_edges=out_edges)
    lean = phase_estimates(shape, lean=True, method=method, out_edges=out_edges)
    fast_peak, lean_peak = max(fast.values()), max(lean.values())
    if regime != "auto":
        chosen, reason = regime == "lean", f"--regime {regime}"
    elif limit <= 0 or fast_peak <= limit:
        chosen, reason = False, (f"fits {where} {format_bytes(limit)}" if limit > 0
                                 else "available memory unknown")
    elif lean_peak <= limit:
        chosen, reason = True, (f"the fast regime's {format_bytes(fast_peak)} exceeds {where} "
                                f"{format_bytes(limit)}")
    else:
        rows = ", ".join(f"{p} {format_bytes(lean[p])}" for p in PHASES if lean[p])
        raise PartitionMemoryError(
            f"{shape.nodes:,} nodes and {shape.edges:,} edges need an estimated "
            f"{format_bytes(lean_peak)} even in the lean regime ({rows}), more than {where} "
            f"{format_bytes(limit)}",
            hint="raise --memory-limit if the machine has more, use --method random (no "
                 "symmetric graph, no METIS), or partition on a machine with more memory",
        )
    phases = lean if chosen else fast
    disk = int(_DISK_PER_EDGE * shape.edges + _DISK_PER_NODE * shape.nodes
               + shape.node_feature_bytes + shape.edge_feature_bytes)
    seconds = estimate_seconds(shape.edges, lean=chosen, method=method)
    return PartitionPlan(
        lean=chosen, memory_limit=limit, phases=phases, fast_estimate=fast_peak,
        lean_estimate=lean_peak, disk_bytes=disk, seconds=seconds, reason=reason, shape=shape,
        method=method, method_reason=method_reason,
    )


def metis_worst_case(shape: GraphShape, *, out_edges: bool = True) -> int:
    """The lean regime's estimated peak with METIS on a graph it cannot coarsen (its own
    arrays at :data:`_METIS_WORST_PER_EDGE` instead of the community graphs' figure)."""
    lean = phase_estimates(shape, lean=True, method="metis", out_edges=out_edges)
    extra = (_METIS_WORST_PER_EDGE - _METIS_PER_EDGE) * shape.edges
    if max(shape.edges, shape.nodes) > _INT32_IDS:
        extra *= 2.0
    return max(max(lean.values()), lean["assign"] + int(extra))


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(i?[bB]?)\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes of ``20G``, ``512M``, ``1.5T``, ``1000000`` (binary units: G = 2**30).

    Raises ValueError with the text when it is not a size.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size (examples: 20G, 512M, 1.5T)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
