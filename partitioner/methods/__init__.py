"""Partitioning methods behind one call: ``assign_parts(method, indptr, indices, num_parts)``."""

from __future__ import annotations

import numpy as np

from ..errors import PartitionOptionError
from .checks import INT32_MAX, check_csr, check_vweights

__all__ = ["METHODS", "OBJTYPES", "INT32_MAX", "assign_parts", "check_csr", "check_vweights"]

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
) -> np.ndarray:
    """Return the part id (int64) of every node of the symmetric CSR graph ``(indptr, indices)``.

    ``vweights`` is ``(num_nodes, ncon)``: METIS balances every column, KaMinPar only column 0,
    random none (it balances node counts). ``objtype`` (``"cut"`` or ``"vol"``) is METIS's only;
    the others always minimise the edge cut (KaMinPar) or nothing (random). Backends are
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
            indptr, indices, num_parts, vweights=vweights, seed=seed, imbalance=imbalance
        )
    if method == "random":
        from . import random

        return random.assign(len(indptr) - 1, num_parts, seed=seed)
    raise PartitionOptionError(
        f"unknown partitioning method {method!r}; choose one of {', '.join(METHODS)}"
    )
