"""A graph's input arrays that a reader holds in memory, moved to memory-mapped files.

Text, Parquet, OGB and chunked inputs are parsed into memory: their edges (16 bytes per
directed edge as int64) and features stay resident for the whole partition run, where an npz
input is mapped and its pages are read only while a phase needs them. In the lean regime the
command line writes such arrays to ``.npy`` files beside the output and maps them back
(:func:`spill_input`), so that every input behaves like a mapped one: the reader's copies are
freed, and :mod:`partitioner.memory` drops the pages once read.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from .graph import Graph
from .memory import mapping_of

# Arrays smaller than this stay where they are: their file would cost more than they weigh.
SPILL_MIN_BYTES = 1 << 20


def heap_bytes(graph: Graph) -> int:
    """Bytes of ``graph``'s arrays held in memory (not file-mapped) that a spill would move."""
    return sum(a.nbytes for kind in graph.arrays().values() for a in kind
               if a.nbytes >= SPILL_MIN_BYTES and mapping_of(a) is None)


def spill_input(graph: Graph, folder: Path) -> Graph:
    """A graph equal to ``graph`` whose in-memory arrays of 1 MiB and more are ``.npy`` files
    in ``folder`` (created; it must not exist), mapped read-only.

    The caller drops its reference to ``graph`` so that the memory is freed, and removes
    ``folder`` once the run is over. Small arrays and arrays mapped already are kept as they
    are; the graph's types and their order are unchanged.
    """
    folder.mkdir(parents=True)
    names = itertools.count()

    def moved(array: np.ndarray) -> np.ndarray:
        if array.nbytes < SPILL_MIN_BYTES or mapping_of(array) is not None:
            return array
        path = folder / f"{next(names)}.npy"
        np.save(path, np.ascontiguousarray(array), allow_pickle=False)
        mapped: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
        return mapped

    return Graph(
        num_nodes=dict(graph.num_nodes),
        edges={et: (moved(src), moved(dst)) for et, (src, dst) in graph.edges.items()},
        ndata={t: {k: moved(v) for k, v in feats.items()} for t, feats in graph.ndata.items()},
        edata={et: {k: moved(v) for k, v in feats.items()} for et, feats in graph.edata.items()},
    )

