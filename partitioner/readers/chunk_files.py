"""One chunk file of DGL's chunked format, by the chunk's ``format``: edges as ``csv`` text
(optionally compressed) or ``parquet``; node and edge data as ``numpy`` (.npy) or ``parquet``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PartitionInputError
from ..inputs import read_npy
from . import parquet
from .text import check_id_range, parse_edge_columns

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
) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of one edge chunk of type ``key``, checked to hold ``size`` edges with
    ids below ``limits``; errors name the chunk file (and its line or row)."""
    if fmt.get("name") == "parquet":
        src, dst, columns = parquet.read_edge_chunk(file)
        _check_size(file, key, len(src), size)
        parquet.check_id_limits(file, columns, src, dst, limits, node_types)
        return src, dst
    delimiter = fmt.get("delimiter", " ")
    if not isinstance(delimiter, str):
        raise PartitionInputError(f"edges[{key!r}] delimiter must be a string", path=meta_path)
    src, dst, _, layout = parse_edge_columns(
        file, delimiter=delimiter, allow_header=False, read_weight=False
    )
    _check_size(file, key, len(src), size)
    check_id_range(file, layout, "#", src, dst, limits, node_types)
    return src, dst


def _check_size(file: str, key: str, got: int, size: int) -> None:
    if got != size:
        raise PartitionInputError(
            f"edge chunk of {key!r} has {got} edges but 'num_edges_per_chunk' says {size}",
            path=file,
        )


def read_feature_chunk(file: str, fmt: dict[str, Any]) -> np.ndarray:
    """One node or edge data chunk: a ``.npy`` file, or Parquet read as DGL reads it."""
    if fmt.get("name") == "parquet":
        return parquet.read_array(file)
    return read_npy(file)
