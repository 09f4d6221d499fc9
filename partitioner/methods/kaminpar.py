"""KaMinPar partitioning: faster than METIS at a similar cut, but one balance constraint only."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailable, PartitionerError, PartitionOptionError
from .checks import INT32_MAX, check_csr, check_vweights

# ParHIP binary header word 0 is a bit field; a set bit means "absent" or "32-bit":
# bit 0 no edge weights, 1 no node weights, 2 32-bit edge offsets, 3 32-bit node ids,
# 4 32-bit node weights, 5 32-bit edge weights. KaMinPar widens 32-bit fields on read.
_NO_EDGE_WEIGHTS = 1
_NO_NODE_WEIGHTS = 2
_EDGE_OFFSETS_32 = 4
_NODE_IDS_32 = 8
_NODE_WEIGHTS_32 = 16
_EDGE_WEIGHTS_32 = 32
_HEADER_BYTES = 24
# Byte offsets in the file are written in 32 bits while they fit.
_OFFSET_32_MAX = int(np.iinfo(np.uint32).max)


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

    # The Python binding reads graphs from files only; a temporary folder is removed on exit
    # whatever happens.
    with tempfile.TemporaryDirectory(prefix="dglctl-kaminpar-") as tmp:
        path = Path(tmp) / "graph.parhip"
        # __64bit__ is exported by the compiled module but missing from kaminpar's stub.
        wide_ok = bool(kaminpar.__64bit__)  # type: ignore[attr-defined]
        _write_parhip(path, indptr, indices, node_weight, wide_ok=wide_ok)
        try:
            graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP,
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


def _write_parhip(
    path: Path,
    indptr: np.ndarray,
    indices: np.ndarray,
    node_weight: np.ndarray | None,
    *,
    wide_ok: bool,
) -> None:
    """Write the graph in ParHIP binary format: 32-bit ids and weights, no edge weights.

    Each offset is the byte position of a node's first neighbour in the file. They are stored
    in 32 bits whenever they fit, which every KaMinPar build reads; 64-bit offsets, needed past
    4 GiB, are read only by 64-bit builds, and a 32-bit build would exit the whole process on
    them, so that case is refused here instead.
    """
    n = indptr.size - 1
    m = indices.size
    edges_start = _HEADER_BYTES + (n + 1) * 4
    offsets_32 = edges_start + m * 4 <= _OFFSET_32_MAX
    if not offsets_32:
        if not wide_ok:
            raise PartitionOptionError(
                f"{m} adjacency entries are too many for this 32-bit KaMinPar build",
                hint="use --method metis, or a 64-bit KaMinPar build",
            )
        edges_start = _HEADER_BYTES + (n + 1) * 8
    version = _NO_EDGE_WEIGHTS | _NODE_IDS_32 | _NODE_WEIGHTS_32 | _EDGE_WEIGHTS_32
    if offsets_32:
        version |= _EDGE_OFFSETS_32
    if node_weight is None:
        version |= _NO_NODE_WEIGHTS
    offsets = indptr.astype(np.uint64)
    offsets *= 4
    offsets += edges_start
    with open(path, "wb") as f:
        np.array([version, n, m], dtype=np.uint64).tofile(f)
        offsets.astype(np.uint32 if offsets_32 else np.uint64, copy=False).tofile(f)
        del offsets
        indices.tofile(f)
        if node_weight is not None:
            np.ascontiguousarray(node_weight, dtype=np.int32).tofile(f)
