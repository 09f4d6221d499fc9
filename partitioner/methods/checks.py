"""Input checks shared by the C partitioners (METIS, KaMinPar): CSR arrays and node weights.

Its own module so that the backends, which ``assign_parts`` imports on use, never import the
package that imports them.
"""

from __future__ import annotations

import numpy as np

from ..errors import PartitionInputError, PartitionOptionError

INT32_MAX = int(np.iinfo(np.int32).max)


def check_csr(
    indptr: np.ndarray, indices: np.ndarray, num_parts: int, *, backend: str = "METIS",
    wide_offsets: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a CSR graph for a C partitioner; return it as C-contiguous arrays.

    ``indices`` come back int32 (node ids are 32-bit for every backend); ``indptr`` int32, or
    int64 past 2**31 - 1 entries when the backend takes 64-bit offsets (``wide_offsets``;
    otherwise a PartitionOptionError names ``backend``, the count and the way out). Copies
    only when an array is not in that dtype and contiguous already. The checks are linear but
    cheap next to partitioning, and an out-of-range neighbour id would crash the C library
    instead of raising.
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.size < 1 or indices.ndim != 1:
        raise PartitionInputError(
            f"CSR arrays must be 1-D with len(indptr) >= 1, got shapes {indptr.shape} and "
            f"{indices.shape}"
        )
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        raise PartitionInputError(
            f"CSR arrays must be integers, got {indptr.dtype} and {indices.dtype}"
        )
    n = indptr.size - 1
    if int(num_parts) < 1:
        raise PartitionOptionError(f"the number of parts must be >= 1, got {num_parts}")
    if int(num_parts) > max(n, 1):
        raise PartitionOptionError(
            f"cannot split {n} nodes into {num_parts} parts", hint="ask for fewer parts"
        )
    if n > INT32_MAX:
        raise PartitionOptionError(
            f"{n:,} nodes exceed the 32-bit node ids of {backend} (at most {INT32_MAX:,})",
            hint="use --method random (it needs no symmetric graph)",
        )
    wide = indices.size > INT32_MAX
    if wide and not wide_offsets:
        raise PartitionOptionError(
            f"the symmetric graph has {indices.size:,} adjacency entries, more than the "
            f"{INT32_MAX:,} that {backend}'s 32-bit ids can index",
            hint="use --method kaminpar (64-bit offsets), or --method random",
        )
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.size:
        raise PartitionInputError(
            f"indptr must start at 0 and end at len(indices)={indices.size}, got "
            f"{int(indptr[0])}..{int(indptr[-1])}"
        )
    if n and np.any(indptr[1:] < indptr[:-1]):
        raise PartitionInputError("indptr must be non-decreasing")
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise PartitionInputError(
            f"neighbour ids must lie in [0, {n}), got {int(indices.min())}..{int(indices.max())}"
        )
    return (
        np.ascontiguousarray(indptr, dtype=np.int64 if wide else np.int32),
        np.ascontiguousarray(indices, dtype=np.int32),
    )


def check_vweights(vweights: np.ndarray | None, num_nodes: int) -> np.ndarray | None:
    """Validate node weights; return them as a C-contiguous ``(num_nodes, ncon)`` int32 array.

    A 1-D array is one constraint. Weights must be non-negative integers and each column's sum
    must fit in 32 bits, since the C partitioners add them up in their own integer type.
    """
    if vweights is None:
        return None
    w = np.asarray(vweights)
    if w.ndim == 1:
        w = w.reshape(-1, 1)
    if w.ndim != 2 or w.shape[0] != num_nodes or w.shape[1] < 1:
        raise PartitionInputError(
            f"node weights must have shape ({num_nodes}, ncon), got {np.shape(vweights)}"
        )
    if w.dtype.kind == "b":
        w = w.astype(np.int32)
    if w.dtype.kind not in "iu":
        raise PartitionInputError(f"node weights must be integers, got {w.dtype}")
    if w.size and int(w.min()) < 0:
        raise PartitionInputError("node weights must be non-negative")
    sums = w.sum(axis=0, dtype=np.int64)
    if np.any(sums > INT32_MAX):
        raise PartitionOptionError(
            f"node weight column sums {sums.tolist()} exceed 32 bits ({INT32_MAX})",
            hint="scale the weights down",
        )
    return np.ascontiguousarray(w, dtype=np.int32)
