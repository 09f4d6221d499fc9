"""A graph's input arrays on disk, memory-mapped, instead of in memory.

An npz input is mapped: its pages are read only while a phase needs them. Text, Parquet, OGB
and chunked inputs are parsed, and their arrays (16 bytes per directed edge as int64, plus
features) would stay resident for the whole partition run. Two ways out, both into one
:class:`SpillFolder` beside the output:

- text and chunked inputs are parsed chunk by chunk into :class:`Column` s, which move to a
  file once they grow past :data:`STREAM_MIN_BYTES`: the parse never holds more than a chunk;
- what a reader still holds in memory is written out afterwards (:func:`spill_input`).

Either way every input then behaves like a mapped one: :mod:`partitioner.memory` drops its
pages once read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .format import out_of_space_error
from .graph import Graph
from .memory import mapping_of, release_free_memory

# Arrays smaller than this stay where they are: their file would cost more than they weigh.
SPILL_MIN_BYTES = 1 << 20
# A column parsed chunk by chunk stays in memory until it weighs this much (a small input is
# parsed as before, without a file).
STREAM_MIN_BYTES = 64 << 20


class SpillFolder:
    """The folder where one run's input arrays go as files; created on first use.

    The caller removes it (with every mapping of its files dropped) once the run is over.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._next = 0

    def new_file(self, suffix: str) -> Path:
        """A path in the folder that no other array of this run uses."""
        self.path.mkdir(parents=True, exist_ok=True)
        while True:
            path = self.path / f"{self._next}{suffix}"
            self._next += 1
            if not path.exists():
                return path


class Column:
    """An array built by appending row chunks, in memory while small and in a memory-mapped
    file of ``folder`` once it passes :data:`STREAM_MIN_BYTES` (never without a folder).

    :meth:`finish` gives the whole array: the chunks' concatenation (one chunk: that chunk,
    uncopied), or the file mapped read-only. Chunks must have the column's row shape; their
    values are cast to its dtype.
    """

    def __init__(self, dtype: np.dtype | type, row_shape: tuple[int, ...] = (),
                 folder: SpillFolder | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(row_shape)
        self.rows = 0
        self._folder = folder
        self._chunks: list[np.ndarray] = []
        self._held = 0
        self._file: BinaryIO | None = None
        self._path: Path | None = None

    def append(self, chunk: np.ndarray) -> None:
        """Add ``chunk``'s rows at the end."""
        if chunk.shape[1:] != self.row_shape:
            raise ValueError(f"a chunk of rows {chunk.shape[1:]} for a column of rows "
                             f"{self.row_shape}")
        if chunk.shape[0] == 0:
            return
        self.rows += chunk.shape[0]
        if self._file is None:
            self._chunks.append(chunk)
            self._held += chunk.shape[0] * self.dtype.itemsize * int(np.prod(self.row_shape))
            if self._folder is None or self._held < STREAM_MIN_BYTES:
                return
            self._path = self._folder.new_file(".bin")
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed in finish / discard
            chunks, self._chunks, self._held = self._chunks, [], 0
            for held in chunks:
                self._write(held)
            return
        self._write(chunk)

    def _write(self, chunk: np.ndarray) -> None:
        assert self._file is not None and self._path is not None
        try:
            self._file.write(np.ascontiguousarray(chunk, dtype=self.dtype).data)
        except OSError as exc:
            path = self._path
            self.discard()
            full = out_of_space_error(exc, path.parent, file=path.name)
            if full is not None:
                raise full from exc
            raise

    def finish(self) -> np.ndarray:
        """The whole column; the column is empty afterwards."""
        if self._file is None:
            chunks, self._chunks, self._held = self._chunks, [], 0
            if not chunks:
                return np.zeros((0, *self.row_shape), self.dtype)
            if len(chunks) == 1:
                return chunks[0].astype(self.dtype, copy=False)
            # Each chunk is freed, and handed back to the kernel, once copied: the column is
            # held beside its chunks once, not beside a concatenation of them (glibc keeps
            # freed chunks of this size in the heap, where the next column could not use them).
            whole = np.empty((self.rows, *self.row_shape), self.dtype)
            at = 0
            chunks.reverse()
            while chunks:
                chunk = chunks.pop()
                whole[at:at + len(chunk)] = chunk
                at += len(chunk)
                del chunk
                release_free_memory()
            return whole
        assert self._path is not None
        self._file.close()
        self._file = None
        return np.memmap(self._path, dtype=self.dtype, mode="r", shape=(self.rows, *self.row_shape))

    def discard(self) -> None:
        """Drop what was appended and remove the file (on a failed read)."""
        self._chunks, self._held = [], 0
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)


@contextlib.contextmanager
def discarded_on_error(columns: Iterable[Column]) -> Iterator[None]:
    """Columns being filled: on any error in the block, their chunks and files go
    (``columns`` may grow inside the block; it is read only on the error)."""
    try:
        yield
    except BaseException:
        for column in columns:
            column.discard()
        raise


def heap_bytes(graph: Graph) -> int:
    """Bytes of ``graph``'s arrays held in memory (not file-mapped) that a spill would move."""
    return sum(a.nbytes for kind in graph.arrays().values() for a in kind
               if a.nbytes >= SPILL_MIN_BYTES and mapping_of(a) is None)


def spill_input(graph: Graph, folder: SpillFolder) -> Graph:
    """A graph equal to ``graph`` whose in-memory arrays of 1 MiB and more are ``.npy`` files
    in ``folder``, mapped read-only.

    The caller drops its reference to ``graph`` so that the memory is freed, and removes
    ``folder`` once the run is over. Small arrays and arrays mapped already are kept as they
    are; the graph's types and their order are unchanged.
    """

    def moved(array: np.ndarray) -> np.ndarray:
        if array.nbytes < SPILL_MIN_BYTES or mapping_of(array) is not None:
            return array
        path = folder.new_file(".npy")
        np.save(path, np.ascontiguousarray(array), allow_pickle=False)
        mapped: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
        return mapped

    return Graph(
        num_nodes=dict(graph.num_nodes),
        edges={et: (moved(src), moved(dst)) for et, (src, dst) in graph.edges.items()},
        ndata={t: {k: moved(v) for k, v in feats.items()} for t, feats in graph.ndata.items()},
        edata={et: {k: moved(v) for k, v in feats.items()} for et, feats in graph.edata.items()},
    )

