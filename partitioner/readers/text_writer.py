"""Writing plain-text edge lists: ``src dst`` lines formatted in bulk with numpy, atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import PartitionInputError
from ..graph import Graph

# Lines are formatted in batches of this many edges so the text buffer of a huge graph never
# has to exist in memory all at once.
_WRITE_BATCH = 1 << 22


def _digit_counts(values: np.ndarray) -> np.ndarray:
    """Number of decimal digits of each non-negative value."""
    counts = np.ones(len(values), dtype=np.int64)
    top = int(values.max(initial=0))
    power = 10
    # One pass per digit position, not per value.
    while power <= top:
        counts += values >= power
        power *= 10
    return counts


def format_edge_lines(src: np.ndarray, dst: np.ndarray, delimiter: str = " ") -> bytes:
    """ASCII ``src<delimiter>dst\\n`` lines for non-negative id arrays, without a loop per edge.

    Lines are laid out right-aligned in a fixed-width byte matrix, one digit position per pass,
    and the padding is dropped with a mask at the end.
    """
    sep = np.frombuffer(delimiter.encode("ascii"), dtype=np.uint8)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size == 0:
        return b""
    n_src, n_dst = _digit_counts(src), _digit_counts(dst)
    w_src, w_dst = int(n_src.max()), int(n_dst.max())
    width = w_src + len(sep) + w_dst + 1
    lines = np.empty((len(src), width), dtype=np.uint8)
    keep = np.ones((len(src), width), dtype=bool)
    for values, counts, offset, digits in (
        (src, n_src, 0, w_src),
        (dst, n_dst, w_src + len(sep), w_dst),
    ):
        rest = values.copy()
        for place in range(digits):
            column = offset + digits - 1 - place
            lines[:, column] = rest % 10
            rest //= 10
            keep[:, column] = counts > place
        lines[:, offset : offset + digits] += ord("0")
    lines[:, w_src : w_src + len(sep)] = sep
    lines[:, -1] = ord("\n")
    return lines[keep].tobytes()


def write_edge_lines(fh: BinaryIO, src: np.ndarray, dst: np.ndarray, delimiter: str = " ") -> None:
    """Write ``src dst`` lines to an open binary file in bounded-memory batches."""
    for lo in range(0, len(src), _WRITE_BATCH):
        fh.write(
            format_edge_lines(src[lo : lo + _WRITE_BATCH], dst[lo : lo + _WRITE_BATCH], delimiter)
        )


def write_edge_list(graph: Graph, path: str | os.PathLike, *, delimiter: str = " ") -> None:
    """Write a homogeneous graph's edges as ``src dst`` lines, atomically.

    Edge and node data are not written (a text edge list has no place for features).
    """
    path = os.fspath(path)
    if not graph.is_homogeneous:
        raise PartitionInputError(
            "a text edge list holds one node and edge type; this graph is heterogeneous",
            path=path,
            hint="write it with write_chunked instead",
        )
    graph.validate(path)
    src, dst = next(iter(graph.edges.values()))
    folder = Path(path).resolve().parent
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{Path(path).name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write_edge_lines(fh, src, dst, delimiter)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
