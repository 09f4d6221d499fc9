"""Partitioning methods behind one call: ``assign_parts(method, indptr, indices, num_parts)``."""

from __future__ import annotations

import numpy as np

from ..errors import PartitionOptionError
from .checks import INT32_MAX, check_csr, check_vweights
from .parhip import GraphFile

__all__ = ["METHODS", "OBJTYPES", "INT32_MAX", "GraphFile", "assign_parts", "check_csr",
           "check_vweights", "choose_method"]

METHODS = ("metis", "random", "kaminpar")
OBJTYPES = ("cut", "vol")


def assign_parts(
    method: str,
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    vweights: np.ndarray | None = None,
    objtype: str = "cut",
    seed: int = 0,
    imbalance: float = 1.03,
    lean: bool = False,
    graph_file: GraphFile | None = None,
) -> np.ndarray:
    """Return the part id (int64) of every node of the symmetric CSR graph ``(indptr, indices)``.

    ``lean`` asks the backend for its memory-efficient mode where it has one (KaMinPar's
    compressed graph; METIS and random have none). ``graph_file`` is the same graph in a
    ParHIP file (:mod:`.parhip`), which KaMinPar then loads instead of writing one.

    ``vweights`` is ``(num_nodes, ncon)``: METIS balances every column, KaMinPar one weight
    folded from them (``kaminpar.combined_weight``), random none (it balances node counts).
    ``objtype`` (``"cut"`` or ``"vol"``) is METIS's only; the others always minimise the edge
    cut (KaMinPar) or nothing (random). Backends are
    imported here, on use, so a missing libmetis only matters when METIS is asked for.

    Raises:
        PartitionOptionError: unknown method or objtype, or an option out of range.
        BackendUnavailable: the backend's library cannot be loaded.
        PartitionerError: the backend failed.
    """
    if objtype not in OBJTYPES:
        raise PartitionOptionError(
            f"unknown objtype {objtype!r}; choose one of {', '.join(OBJTYPES)}"
        )
    if method == "metis":
        from . import metis

        return metis.assign(
            indptr, indices, num_parts, vweights=vweights, objtype=objtype, seed=seed,
            imbalance=imbalance,
        )
    if method == "kaminpar":
        from . import kaminpar

        return kaminpar.assign(
            indptr, indices, num_parts, vweights=vweights, seed=seed, imbalance=imbalance,
            compressed=lean, graph_file=graph_file,
        )
    if method == "random":
        from . import random

        return random.assign(len(indptr) - 1, num_parts, seed=seed)
    raise PartitionOptionError(
        f"unknown partitioning method {method!r}; choose one of {', '.join(METHODS)}"
    )


def choose_method(adjacency_entries: int, *, avoid_metis: str | None = None) -> tuple[str, str]:
    """``--method auto``: the backend for a symmetric graph of ``adjacency_entries``, and why.

    METIS wherever it can go: its cut is the reference and it holds several balance
    constraints at once. KaMinPar past METIS's 32-bit ids (2**31 - 1 adjacency entries, about
    a billion undirected edges), where libmetis does not load, or where ``avoid_metis`` says
    why not (the memory plan's :attr:`~partitioner.memory_plan.PartitionPlan.method_reason`)
    and KaMinPar is installed.

    Raises:
        BackendUnavailable: neither backend can take the graph.
    """
    import importlib.util

    from ..errors import BackendUnavailable

    has_kaminpar = importlib.util.find_spec("kaminpar") is not None
    if adjacency_entries > INT32_MAX:
        if not has_kaminpar:
            raise BackendUnavailable(
                f"{adjacency_entries:,} adjacency entries exceed METIS's 32-bit ids and "
                f"kaminpar is not installed", hint="pip install kaminpar, or --method random")
        return "kaminpar", (f"{adjacency_entries:,} adjacency entries exceed METIS's 32-bit "
                            f"ids; KaMinPar balances one weight (nodes and training nodes "
                            f"folded), the report gives each balance")
    if avoid_metis and has_kaminpar:
        return "kaminpar", avoid_metis
    try:
        from .metis import load_libmetis

        load_libmetis()
    except BackendUnavailable as exc:
        if not has_kaminpar:
            raise
        return "kaminpar", f"libmetis does not load ({exc.args[0]})"
    return "metis", f"{adjacency_entries:,} adjacency entries fit METIS's 32-bit ids"
