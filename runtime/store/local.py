"""``LocalPartition``: one machine's part as arrays, and every operation on it that needs no peer.

The graph server answers requests with these operations, and a trainer or sampler on the same
host runs the very same ones on the same shared memory for the ids its machine owns (as DGL's
``_in_degrees`` serves both). So degrees, find_edges, sampling, row gathers and row writes
exist once. Standalone mode (no servers) builds it from the partition files instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from partitioner.format import PartConfig, load_array
from partitioner.graph import parse_etype_key
from partitioner.loader import Partition, check_out_edges, load_partition
from partitioner.partition_book import RangePartitionBook

from ..errors import DistError
from ..sampling import kernels
from ..sampling.draws import sample_on_part
from .layout import OUT_CSR, graph_tensor, orig_tensor
from .shm import ShmArena
from .sparse_update import apply_update
from .write_counts import NAME as WRITE_COUNTS
from .write_counts import SLOTS as WRITE_SLOTS
from .write_counts import WriteCounts

EDGE_DIRS = ("in", "out")


class LocalPartition:
    """The arrays of machine ``machine_id``: CSC and out-CSR per edge type, the input ids of its
    owned nodes, and named tensors (features, DistTensors), each found on first use.

    Args:
        config: the partition's config (``read_config``).
        book: its partition book.
        machine_id: the machine (= part) these arrays belong to.
        find: name -> array, or None when there is no such array.
    """

    def __init__(self, config: PartConfig, book: RangePartitionBook, machine_id: int,
                 find: Callable[[str, bool], np.ndarray | None]) -> None:
        self.config = config
        self.book = book
        self.machine_id = machine_id
        self._find = find
        self.tensors: dict[str, np.ndarray] = {}
        self.part: Partition | None = None  # standalone: the part's files (from_files)
        # Shared write counters (from_shm; None standalone: no other process reads copies).
        self.writes: WriteCounts | None = None
        self._csc: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._csr: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @classmethod
    def from_shm(cls, arena: ShmArena, config: PartConfig, book: RangePartitionBook
                 ) -> LocalPartition:
        """The arrays the machine's main server put in shared memory (mapped, not copied)."""
        def find(name: str, writable: bool) -> np.ndarray | None:
            return arena.attach(name, writable=writable) if arena.exists(name) else None

        local = cls(config, book, arena.machine_id, find)
        local.attach_write_counts(arena)
        return local

    def attach_write_counts(self, arena: ShmArena, create: bool = False) -> None:
        """Count this process's writes in the machine's shared write counters (``create``:
        the main server makes them, zeroed, before it publishes the partition); a no-op
        while they do not exist yet."""
        if create:
            counts = arena.create(WRITE_COUNTS, (WRITE_SLOTS,), np.int64)
            counts[:] = 0
        elif arena.exists(WRITE_COUNTS):
            counts = arena.attach(WRITE_COUNTS, writable=True)
        else:
            return
        self.writes = WriteCounts(counts, arena.path(WRITE_COUNTS))

    @classmethod
    def from_files(cls, config: PartConfig, book: RangePartitionBook) -> LocalPartition:
        """Standalone mode (one part): the partition files, features copied so that writes
        never reach the files."""
        part = load_partition(config, 0)
        arrays: dict[str, np.ndarray] = {}
        for key, arr in {**part.node_feats(), **part.edge_feats()}.items():
            arrays[key] = np.array(arr)
        for ntype, rel in config.orig_nids.items():
            arrays[orig_tensor(ntype)] = np.asarray(load_array(config, rel))
        for etype in config.etypes:
            for what, arr in zip(("indptr", "indices"), part.csc(etype), strict=True):
                arrays[graph_tensor(etype, what)] = np.asarray(arr)
            if part.has_out_edges:
                for what, arr in zip(OUT_CSR, part.csr(etype), strict=True):
                    arrays[graph_tensor(etype, what)] = np.asarray(arr)
        local = cls(config, book, 0, lambda name, writable: arrays.get(name))
        local.part = part
        return local

    # --- arrays ------------------------------------------------------------------------------
    def tensor(self, name: str) -> np.ndarray:
        """The machine's rows of tensor ``name``; DistError if the machine has none."""
        arr = self.tensors.get(name)
        if arr is None:
            arr = self._find(name, True)
            if arr is None:
                raise DistError(f"no tensor named {name!r} on machine {self.machine_id}")
            self.tensors[name] = arr
        return arr

    def csc(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: in-edges of ``etype`` grouped by owned destination, with
        homogeneous source ids."""
        csc = self._csc.get(etype)
        if csc is None:
            csc = self._csc[etype] = (self._graph(etype, "indptr"), self._graph(etype, "indices"))
        return csc

    def out_csr(self, etype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indptr, indices, eids)``: out-edges of ``etype`` grouped by owned source, with
        homogeneous destination and edge ids. DistError naming the fix if not written."""
        csr = self._csr.get(etype)
        if csr is None:
            check_out_edges(self.config)  # written with --no-out-edges: say so, name the fix
            csr = self._csr[etype] = tuple(  # type: ignore[assignment]
                self._graph(etype, what) for what in OUT_CSR)
        return csr  # type: ignore[return-value]

    def _graph(self, etype: str, what: str) -> np.ndarray:
        arr = self._find(graph_tensor(etype, what), False)
        if arr is None:
            raise DistError(f"machine {self.machine_id} holds no {what} of edge type {etype!r}",
                            hint="the partition and the job do not match; re-launch")
        return arr

    # --- operations (ids are local to this machine) ------------------------------------------
    def checked(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Tensor ``name``, after checking that rows ``ids`` are the machine's (DistError)."""
        arr = self.tensor(name)
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= len(arr)):
            raise DistError(f"row ids of {name!r} outside [0, {len(arr)}) on machine "
                            f"{self.machine_id}")
        return arr

    def gather(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of tensor ``name``; a DistError for ids outside the machine's rows."""
        return kernels.gather_rows(self.checked(name, ids), ids)

    def write(self, name: str, ids: np.ndarray, rows: np.ndarray, mode: str = "set") -> None:
        """Write (``set``) or accumulate (``add``: duplicates add up) rows ``ids``."""
        arr = self.tensor(name)
        if mode == "add":
            np.add.at(arr, ids, rows)
        elif mode == "set":
            arr[ids] = rows
        else:
            raise DistError(f"write mode must be 'set' or 'add', got {mode!r}")
        if self.writes is not None:
            self.writes.bump(name)

    def degrees(self, etype: str, ids: np.ndarray, edge_dir: str = "in") -> np.ndarray:
        """In-degrees (of owned destinations) or out-degrees (of owned sources) of ``ids``."""
        indptr = self.csc(etype)[0] if _check_dir(edge_dir) == "in" else self.out_csr(etype)[0]
        return np.asarray(indptr[ids + 1] - indptr[ids], dtype=np.int64)

    def find_edges(self, etype: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous ``(src, dst)`` node ids of the machine's edges ``ids`` of ``etype``."""
        indptr, indices = self.csc(etype)
        src = np.asarray(indices[ids], dtype=np.int64)
        dst_local = np.searchsorted(indptr, ids, side="right") - 1
        dst_type = parse_etype_key(etype)[2]
        nodes = self.book.nodes
        dst_pt = dst_local + nodes.typed_start[self.machine_id, nodes.type_index(dst_type)]
        return src, np.asarray(self.book.map_to_homo_nid(dst_pt, dst_type), dtype=np.int64)

    def sample(self, etype: str, seeds: np.ndarray, salt: int, fanout: int, replace: bool,
               seed: int, prob: str | None = None, excluded: np.ndarray | None = None,
               edge_dir: str = "in") -> list[np.ndarray]:
        """Sample up to ``fanout`` in-edges (``"in"``) or out-edges of local ``seeds``.

        "in": returns [seed index, homogeneous source id, CSC position]; ``excluded`` holds
        sorted CSC positions. "out": [seed index, homogeneous destination id, homogeneous edge
        id]; ``excluded`` holds sorted homogeneous edge ids. Draws are keyed by the seeds'
        input ids (see ``runtime.sampling.draws``).
        """
        if _check_dir(edge_dir) == "out":
            if prob:
                raise DistError("prob= is not supported with edge_dir='out'")
            indptr, indices, eids = self.out_csr(etype)
            seed_type = parse_etype_key(etype)[0]
        else:
            (indptr, indices), eids = self.csc(etype), None
            seed_type = parse_etype_key(etype)[2]
        key_ids = kernels.gather_rows(self.tensor(orig_tensor(seed_type)), seeds)
        weights = self.tensor(f"{etype}/{prob}") if prob else None
        return sample_on_part(indptr, indices, seeds, key_ids, salt, fanout, replace, seed,
                              weights, excluded if excluded is not None and len(excluded)
                              else None, eids)

    def sparse_update(self, kind: str, weight: str, states: list[str], ids: np.ndarray,
                      grads: np.ndarray, params: dict[str, Any]) -> None:
        """Apply an optimizer step to rows ``ids`` of embedding table ``weight``."""
        apply_update(kind, self.tensor(weight), [self.tensor(n) for n in states], ids, grads,
                     params)
        if self.writes is not None:
            self.writes.bump(weight)


def _check_dir(edge_dir: str) -> str:
    if edge_dir not in EDGE_DIRS:
        raise DistError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    return edge_dir
