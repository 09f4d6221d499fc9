"""One chunk file of DGL's chunked format, by the chunk's ``format``: edges as ``csv`` text
(optionally compressed) or ``parquet``; node and edge data as ``numpy`` (.npy) or ``parquet``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PartitionInputError
from ..inputs import read_npy
from ..spill import Column
from . import parquet
from .text import check_id_range, detect_layout, edge_chunks

EDGE_FORMATS = ("csv", "parquet")
FEATURE_FORMATS = ("numpy", "parquet")


def read_edge_chunk(
    file: str,
    fmt: dict[str, Any],
    *,
    key: str,
    size: int,
    limits: tuple[int, int],
    node_types: tuple[str, str],
    meta_path: str,
    into: tuple[Column, Column],
) -> None:
    """Append the ``(src, dst)`` of one edge chunk of type ``key`` to the columns ``into``,
    checked to hold ``size`` edges with ids below ``limits``; errors name the chunk file (and
    its line or row). A text chunk is read a part at a time (``text.edge_chunks``)."""
    if fmt.get("name") == "parquet":
        src, dst, columns = parquet.read_edge_chunk(file)
        _check_size(file, key, len(src), size)
        parquet.check_id_limits(file, columns, src, dst, limits, node_types)
        into[0].append(src)
        into[1].append(dst)
        return
    delimiter = fmt.get("delimiter", " ")
    if not isinstance(delimiter, str):
        raise PartitionInputError(f"edges[{key!r}] delimiter must be a string", path=meta_path)
    layout = detect_layout(file, delimiter=delimiter, allow_header=False)
    rows = 0
    for src, dst in edge_chunks(file, layout, "#", read_weight=False):
        check_id_range(file, layout, "#", src, dst, limits, node_types, first_row=rows)
        rows += len(src)
        if rows > size:
            break  # the count is wrong: said below without parsing the rest
        into[0].append(src)
        into[1].append(dst)
    _check_size(file, key, rows, size)


def _check_size(file: str, key: str, got: int, size: int) -> None:
    if got != size:
        raise PartitionInputError(
            f"edge chunk of {key!r} has {'more than ' + str(size) if got > size else got} edges "
            f"but 'num_edges_per_chunk' says {size}",
            path=file,
        )


def read_feature_chunk(file: str, fmt: dict[str, Any]) -> np.ndarray:
    """One node or edge data chunk: a ``.npy`` file, or Parquet read as DGL reads it."""
    if fmt.get("name") == "parquet":
        return parquet.read_array(file)
    return read_npy(file)
