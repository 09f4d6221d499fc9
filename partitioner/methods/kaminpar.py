"""KaMinPar partitioning: faster than METIS at a similar cut, but one balance constraint only."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailable, PartitionerError, PartitionOptionError
from ..memory import drop_mapped_pages
from .checks import INT32_MAX, check_csr, check_vweights
from .parhip import GraphFile


def assign(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    vweights: np.ndarray | None = None,
    seed: int = 0,
    imbalance: float = 1.03,
    threads: int | None = None,
    compressed: bool = False,
    graph_file: GraphFile | None = None,
) -> np.ndarray:
    """Partition a symmetric CSR graph (no self loops) into ``num_parts`` with KaMinPar.

    KaMinPar balances a single node weight: the columns of ``vweights`` are folded into one
    (:func:`combined_weight`: with nodes and training nodes, ``1 + c * train``), and only that
    sum is held within ``imbalance``; use METIS when several constraints must each hold.
    ``None`` balances node counts.

    Args:
        indptr, indices: the graph, as from :func:`partitioner.symmetric.symmetric_csr`.
        num_parts: number of parts; 1 returns all zeros without calling KaMinPar.
        vweights: ``(num_nodes, ncon)`` non-negative integer weights, folded into one.
        seed: KaMinPar's random seed. Results repeat for a seed with ``threads=1``; with more
            threads they may differ from run to run.
        imbalance: allowed max-part / mean-part weight (KaMinPar's epsilon is this minus 1).
        threads: worker threads; ``None`` uses every CPU this process may run on.
        compressed: KaMinPar's memory-efficient mode (TeraPart): the graph is held compressed
            and the context is ``terapart_context`` (the lean regime of a partition run).
        graph_file: the same graph already in a ParHIP file (:mod:`.parhip`, the lean
            regime's symmetrize writes it) whose ``indices`` are its mapping: KaMinPar loads
            the file, and the mapping's pages leave the process once checked. Without it the
            graph is written to a temporary file first.

    Returns:
        int64 array with the part id of every node.

    Raises:
        PartitionOptionError: bad ``num_parts``, ``imbalance`` or ``threads``, or a graph too
            large for this KaMinPar build.
        BackendUnavailable: the ``kaminpar`` package cannot be imported.
        PartitionerError: KaMinPar cannot read the graph it was given.
    """
    indptr, indices = check_csr(indptr, indices, num_parts, backend="KaMinPar",
                                wide_offsets=True)
    if graph_file is not None:
        drop_mapped_pages(indices)  # the check read them: KaMinPar reads the file instead
    n = indptr.size - 1
    weights = check_vweights(vweights, n)
    if not imbalance >= 1.0:
        raise PartitionOptionError(f"imbalance must be >= 1.0, got {imbalance}")
    if threads is None:
        threads = len(os.sched_getaffinity(0))
    if threads < 1:
        raise PartitionOptionError(f"threads must be >= 1, got {threads}")
    if num_parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    node_weight = None if weights is None else combined_weight(weights)

    try:
        import kaminpar
    except ImportError as exc:
        raise BackendUnavailable(
            f"cannot import kaminpar ({exc})", hint="pip install kaminpar"
        ) from exc

    # __64bit__ is exported by the compiled module but missing from kaminpar's stub.
    wide_ok = bool(kaminpar.__64bit__)  # type: ignore[attr-defined]
    # The Python binding reads graphs from files only; a temporary folder is removed on exit
    # whatever happens.
    with tempfile.TemporaryDirectory(prefix="dglctl-kaminpar-") as tmp:
        if graph_file is None:
            graph_file = GraphFile(Path(tmp) / "graph.parhip", n)
            graph_file.write(indptr, indices)
        graph_file.check_offsets(wide_ok)
        graph_file.set_node_weights(node_weight)
        try:
            graph = kaminpar.load_graph(str(graph_file.path), kaminpar.GraphFileFormat.PARHIP,
                                        compress=compressed)
        except ValueError as exc:
            raise PartitionerError(f"KaMinPar could not read the graph: {exc}") from exc
    kaminpar.reseed(int(seed))
    context = kaminpar.terapart_context() if compressed else kaminpar.default_context()
    solver = kaminpar.KaMinPar(int(threads), context)
    part = solver.compute_partition(graph, int(num_parts), float(imbalance) - 1.0)
    return np.asarray(part, dtype=np.int64)


def combined_weight(weights: np.ndarray) -> np.ndarray | None:
    """One node weight standing for every balance column: KaMinPar balances a single one.

    Each column is scaled so that its total equals the largest column total, then the
    columns are added: with nodes and training nodes, a node weighs ``1 + c * train`` with
    ``c = nodes / train nodes``. Only this sum is balanced, not each column (METIS's several
    constraints): one column can end far off (nodes 4:1 on a skewed grid), and the quality
    report gives the balance each got.
    All-zero columns are left out; None when nothing is left (balance node counts).
    """
    totals = weights.sum(axis=0, dtype=np.int64)
    keep = np.flatnonzero(totals > 0)
    if keep.size == 0:
        return None
    reference = int(totals[keep].max())
    scale = np.array([max(1, round(reference / int(totals[j]))) for j in keep], np.int64)
    # The scaled total must stay in KaMinPar's 32-bit node weights.
    while int((totals[keep] * scale).sum()) > INT32_MAX and scale.max() > 1:
        scale = np.maximum(1, scale // 2)
    combined = np.zeros(weights.shape[0], np.int64)
    for j, c in zip(keep, scale, strict=True):
        combined += weights[:, j].astype(np.int64) * int(c)
    return np.minimum(combined, INT32_MAX).astype(np.int32)
