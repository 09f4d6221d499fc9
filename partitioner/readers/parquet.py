"""Parquet inputs: an edge list (``edges.parquet``) and the parquet chunks of DGL's chunked format.

pyarrow is optional (``pip install 'dglctl[parquet]'``) and imported only when a parquet file
is read. Columns become numpy arrays in one vectorised conversion each; errors name the file,
the column and, for a bad value, its 0-based row.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from ..errors import PartitionInputError, PartitionOptionError
from ..graph import Graph
from ..inputs import id_space_too_sparse, load_node_data, resolve_num_nodes, sparse_ids_error

INSTALL_HINT = "pip install 'dglctl[parquet]' (it installs pyarrow)"
ID_COLUMNS = ("src", "dst")


def _pyarrow(path: str) -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, or a PartitionInputError naming the file and the fix."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise PartitionInputError(
            "reading Parquet needs pyarrow, which is not installed", path=path, hint=INSTALL_HINT
        ) from exc
    return pyarrow, pyarrow.parquet


def read_table(path: str | os.PathLike) -> Any:
    """The whole file as a ``pyarrow.Table`` (memory-mapped); PartitionInputError if it is not
    a readable Parquet file."""
    path = os.fspath(path)
    pa, pq = _pyarrow(path)
    if not os.path.isfile(path):
        raise PartitionInputError(
            "no such file" if not os.path.exists(path) else "not a regular file", path=path
        )
    try:
        return pq.read_table(path, memory_map=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise PartitionInputError(
            f"not a readable Parquet file ({exc})", path=path,
            hint="write it with pyarrow.parquet.write_table or pandas.DataFrame.to_parquet",
        ) from exc


def _describe(table: Any) -> str:
    return ", ".join(f"{f.name} ({f.type})" for f in table.schema) or "none"


def edge_column_names(table: Any, path: str) -> tuple[str, str]:
    """The source and destination columns: ``src`` and ``dst`` when both exist, else the first
    two integer columns."""
    pa = _pyarrow(path)[0]
    names = table.column_names
    if all(name in names for name in ID_COLUMNS):
        return ID_COLUMNS
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    if len(ints) < 2:
        raise PartitionInputError(
            f"has no edge columns: it needs 'src' and 'dst' columns, or two integer columns "
            f"(found: {_describe(table)})",
            path=path,
            hint="name the columns src and dst, with integer node ids",
        )
    return ints[0], ints[1]


def id_column(table: Any, name: str, path: str) -> np.ndarray:
    """Column ``name`` as int64 node ids; refuses nulls, non-integers and negative ids by row."""
    pa = _pyarrow(path)[0]
    column = table.column(name)
    if not pa.types.is_integer(column.type):
        raise PartitionInputError(
            f"column {name!r} must hold integer node ids (it is {column.type})", path=path
        )
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise PartitionInputError(f"column {name!r} is null at row {row} (0-based)", path=path)
    ids = column.to_numpy().astype(np.int64, copy=False)
    if ids.size and int(ids.min()) < 0:
        row = int(np.flatnonzero(ids < 0)[0])
        raise PartitionInputError(
            f"column {name!r} has negative node id {int(ids[row])} at row {row} (0-based)",
            path=path,
        )
    return ids


def check_id_limits(
    path: str, columns: tuple[str, str], src: np.ndarray, dst: np.ndarray,
    limits: tuple[int | None, int | None], node_types: tuple[str, str] | None = None,
) -> None:
    """Raise for the first id at or above its limit, naming the column and its 0-based row."""
    for name, ids, limit, ntype in zip(columns, (src, dst), limits, node_types or ("", ""),
                                       strict=True):
        if limit is None or ids.size == 0 or int(ids.max()) < limit:
            continue
        row = int(np.flatnonzero(ids >= limit)[0])
        kind = f"{ntype} " if ntype else ""
        raise PartitionInputError(
            f"column {name!r}: node id {int(ids[row])} at row {row} (0-based) is out of range: "
            f"there are {limit} {kind}nodes (ids 0..{limit - 1})",
            path=path,
        )


def _edge_data(table: Any, skip: tuple[str, str], path: str) -> dict[str, np.ndarray]:
    """Every other numeric or boolean column, as edge data under its own name."""
    pa = _pyarrow(path)[0]
    edata: dict[str, np.ndarray] = {}
    for field in table.schema:
        if field.name in skip:
            continue
        if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                or pa.types.is_boolean(field.type)):
            continue  # strings, lists, timestamps: not edge data the partitioner stores
        column = table.column(field.name)
        if column.null_count:
            raise PartitionInputError(
                f"edge column {field.name!r} has {column.null_count} null value(s)", path=path,
                hint="fill or drop the nulls, or drop the column",
            )
        edata[field.name] = column.to_numpy()
    return edata


def read_parquet_edges(
    path: str | os.PathLike,
    *,
    num_nodes: int | None = None,
    node_data: dict[str, str] | None = None,
) -> Graph:
    """Read a homogeneous graph from a Parquet edge list, one row per directed edge.

    Ids come from columns ``src`` and ``dst``, or else the first two integer columns; every
    other numeric or boolean column becomes edge data under its own name (e.g. ``weight``).
    ``num_nodes`` and ``node_data`` (name -> ``.npy`` file) work as for text edge lists.
    Raises PartitionInputError naming the file, the column and the row of a bad id.
    """
    path = os.fspath(path)
    if num_nodes is not None and int(num_nodes) < 0:
        raise PartitionOptionError(f"num_nodes must be >= 0 (got {num_nodes})")
    table = read_table(path)
    columns = edge_column_names(table, path)
    src, dst = (id_column(table, name, path) for name in columns)
    limit = None if num_nodes is None else int(num_nodes)
    check_id_limits(path, columns, src, dst, (limit, limit))
    features = load_node_data(node_data)
    n = resolve_num_nodes(num_nodes, src, dst, features, node_data, path)
    if num_nodes is None and id_space_too_sparse(n, len(src)) and n == _max_id(src, dst) + 1:
        end = 0 if src.size and int(src.max()) == n - 1 else 1
        row = int(np.argmax((src, dst)[end]))
        raise sparse_ids_error(n - 1, len(src), path=path,
                               where=f" (column {columns[end]!r}, row {row})")
    graph = Graph.homogeneous(src, dst, n, ndata=features, edata=_edge_data(table, columns, path))
    graph.validate(path)
    return graph


def _max_id(src: np.ndarray, dst: np.ndarray) -> int:
    return int(max(src.max(initial=-1), dst.max(initial=-1)))


def read_edge_chunk(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, tuple[str, str]]:
    """One edge chunk of DGL's chunked format in Parquet: ``(src, dst, column names)``.

    DGL reads the first two columns; so do we, unless columns ``src`` and ``dst`` exist.
    """
    path = os.fspath(path)
    table = read_table(path)
    columns = edge_column_names(table, path)
    src, dst = (id_column(table, name, path) for name in columns)
    return src, dst, columns


_SHAPE = re.compile(r"^\(\s*(\d+\s*(?:,\s*\d+\s*)*),?\s*\)$")


def read_array(path: str | os.PathLike) -> np.ndarray:
    """A node or edge data chunk of DGL's chunked format in Parquet, as DGL reads it.

    One list column (Spark's vector rows) stacks into a 2-D array; otherwise the columns, in
    order, make the columns of a 2-D array. A ``shape`` entry in the schema metadata (what
    DGL's writer stores, e.g. ``"(100,)"``) reshapes it; it is parsed, never evaluated.
    """
    path = os.fspath(path)
    pa = _pyarrow(path)[0]
    table = read_table(path)
    if table.num_columns == 0:
        raise PartitionInputError("has no columns", path=path)
    for name, column in zip(table.column_names, table.columns, strict=True):
        if column.null_count:
            raise PartitionInputError(
                f"column {name!r} holds {column.null_count} null value(s)", path=path
            )
    types = table.schema.types
    try:
        if len(types) == 1 and (pa.types.is_list(types[0]) or pa.types.is_large_list(types[0])
                                or pa.types.is_fixed_size_list(types[0])):
            rows = table.column(0).to_numpy(zero_copy_only=False)
            arr = np.stack(rows) if len(rows) else np.zeros((0, 0))
        else:
            arr = np.column_stack([c.to_numpy() for c in table.columns])
    except (ValueError, TypeError, pa.ArrowException) as exc:
        raise PartitionInputError(
            f"columns are not one numeric array ({exc}); columns: {_describe(table)}", path=path
        ) from exc
    shape = (table.schema.metadata or {}).get(b"shape")
    if shape is None:
        return arr
    match = _SHAPE.match(shape.decode("utf-8", "replace").strip())
    dims = tuple(int(d) for d in match.group(1).split(",")) if match else None
    if dims is None or int(np.prod(dims)) != arr.size:
        raise PartitionInputError(
            f"schema metadata 'shape' {shape!r} does not fit the {arr.shape} values stored",
            path=path,
        )
    return arr.reshape(dims)
