"""The symmetric graph as a file in ParHIP's binary layout, built in place through a mapping.

KaMinPar's Python binding reads graphs from files only. In the lean regime the symmetrize
writes its adjacency array straight into such a file (:meth:`GraphFile.indices` is the
allocator it fills), beside the output: the graph for the partitioner is on disk, its pages
leave the process once written (:meth:`GraphFile.seal`), and KaMinPar loads the file with no
copy of it ever held in memory. METIS reads the same adjacency through a read-only mapping
(the kernel can evict those pages under pressure, and fault them back in as METIS reads).

The layout: a 24-byte header (version bit field, node count, entry count, each uint64); the
byte offset of each node's first neighbour in the file ((n + 1) of them, 32-bit while the file
is under 4 GiB, else 64-bit); the neighbours (int32); the node weights (int32), if any.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from ..errors import PartitionOptionError

# Header word 0 is a bit field; a set bit means "absent" or "32-bit": bit 0 no edge weights,
# 1 no node weights, 2 32-bit edge offsets, 3 32-bit node ids, 4 32-bit node weights, 5 32-bit
# edge weights. KaMinPar widens 32-bit fields on read.
_NO_EDGE_WEIGHTS = 1
_NO_NODE_WEIGHTS = 2
_EDGE_OFFSETS_32 = 4
_NODE_IDS_32 = 8
_NODE_WEIGHTS_32 = 16
_EDGE_WEIGHTS_32 = 32
HEADER_BYTES = 24
# Byte offsets in the file are written in 32 bits while they fit.
_OFFSET_32_MAX = int(np.iinfo(np.uint32).max)


class GraphFile:
    """One symmetric graph of ``num_nodes`` nodes in a ParHIP file at ``path``.

    Either :meth:`indices` (the allocator :func:`partitioner.symmetric.symmetric_csr` fills)
    then :meth:`seal`, or :meth:`write` of arrays in memory; then :meth:`set_node_weights`
    as the backend needs, :meth:`mapped_indices` to read the adjacency, and :meth:`remove`.
    """

    def __init__(self, path: Path, num_nodes: int) -> None:
        self.path = Path(path)
        self.num_nodes = int(num_nodes)
        self.nnz: int | None = None
        self._offsets_32 = True
        self._writable: np.memmap | None = None

    @property
    def offsets_32(self) -> bool:
        """Whether the byte offsets are 32-bit (every KaMinPar build reads them); 64-bit past
        4 GiB, which only 64-bit builds read."""
        return self._offsets_32

    @property
    def edges_start(self) -> int:
        """Byte position of the first neighbour."""
        return HEADER_BYTES + (self.num_nodes + 1) * (4 if self._offsets_32 else 8)

    def indices(self, nnz: int) -> np.ndarray:
        """A writable int32 array of ``nnz`` entries inside the file (created at its full
        size), for the neighbours."""
        nnz = int(nnz)
        self._set_size(nnz)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "wb") as f:
            f.truncate(self.edges_start + nnz * 4)
        if nnz == 0:
            return np.zeros(0, np.int32)
        self._writable = np.memmap(str(self.path), np.int32, "r+", offset=self.edges_start,
                                   shape=(nnz,))
        return self._writable

    def seal(self, indptr: np.ndarray) -> np.ndarray:
        """Write the header and offsets for ``indptr`` once the neighbours are in; unmap the
        writable array (its pages go to the page cache, out of this process: the caller drops
        its own reference to it too) and return :meth:`mapped_indices`."""
        assert self.nnz is not None, "seal() follows indices()"
        if int(indptr[-1]) != self.nnz:
            raise ValueError(f"indptr ends at {int(indptr[-1])}, the file holds {self.nnz}")
        self._writable = None
        with open(self.path, "r+b") as f:
            self._write_head(f, indptr)
        return self.mapped_indices()

    def write(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        """The whole file from arrays in memory (the fast regime's way)."""
        self._set_size(int(indices.size))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "wb") as f:
            self._write_head(f, indptr)
            np.ascontiguousarray(indices, dtype=np.int32).tofile(f)

    def set_node_weights(self, node_weight: np.ndarray | None) -> None:
        """Append ``node_weight`` (int32, one per node) after the neighbours, or none; the
        header says which."""
        assert self.nnz is not None, "the graph is written first"
        end = self.edges_start + self.nnz * 4
        with open(self.path, "r+b") as f:
            f.truncate(end)
            f.seek(0)
            version = self._version(weights=node_weight is not None)
            f.write(np.array([version], np.uint64).tobytes())
            if node_weight is not None:
                f.seek(end)
                np.ascontiguousarray(node_weight, dtype=np.int32).tofile(f)

    def check_offsets(self, wide_ok: bool) -> None:
        """PartitionOptionError when the offsets are 64-bit and the reader takes 32-bit only
        (a 32-bit KaMinPar build would exit the whole process on them)."""
        if not self._offsets_32 and not wide_ok:
            raise PartitionOptionError(
                f"{self.nnz} adjacency entries are too many for this 32-bit KaMinPar build",
                hint="use --method metis, or a 64-bit KaMinPar build",
            )

    def mapped_indices(self) -> np.ndarray:
        """The neighbours, mapped read-only (pages read only as they are used)."""
        assert self.nnz is not None, "the graph is written first"
        if self.nnz == 0:
            return np.zeros(0, np.int32)
        return np.memmap(str(self.path), np.int32, "r", offset=self.edges_start,
                         shape=(self.nnz,))

    def remove(self) -> None:
        """Delete the file (mappings of it stay readable until dropped)."""
        self._writable = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _set_size(self, nnz: int) -> None:
        self.nnz = nnz
        self._offsets_32 = HEADER_BYTES + (self.num_nodes + 1) * 4 + nnz * 4 <= _OFFSET_32_MAX

    def _version(self, *, weights: bool) -> int:
        version = _NO_EDGE_WEIGHTS | _NODE_IDS_32 | _NODE_WEIGHTS_32 | _EDGE_WEIGHTS_32
        if self._offsets_32:
            version |= _EDGE_OFFSETS_32
        if not weights:
            version |= _NO_NODE_WEIGHTS
        return version

    def _write_head(self, f, indptr: np.ndarray) -> None:  # noqa: ANN001
        """Header (no node weights: :meth:`set_node_weights` adds them) and offsets at the
        start of the open file ``f``, in blocks of rows."""
        assert self.nnz is not None
        f.seek(0)
        np.array([self._version(weights=False), self.num_nodes, self.nnz],
                 dtype=np.uint64).tofile(f)
        dtype = np.uint32 if self._offsets_32 else np.uint64
        start = self.edges_start
        for lo in range(0, len(indptr), _BLOCK):
            block = indptr[lo:lo + _BLOCK].astype(np.uint64)
            block *= 4
            block += start
            block.astype(dtype, copy=False).tofile(f)


# Offsets are converted this many at a time (a 32 MB temporary).
_BLOCK = 1 << 22
