"""Reading a sparse adjacency matrix saved by ``scipy.sparse.save_npz`` as a graph's edges.

scipy's archive holds ``format`` and ``shape`` plus ``data`` and ``indices``/``indptr`` (csr,
csc, bsr), ``row``/``col`` (coo) or ``offsets`` (dia); dglctl's own ``.npz`` layout
(``readers.npz``) never has a ``format`` or ``shape`` key, which is how the two are told apart.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from ..errors import PartitionInputError
from ..graph import Graph
from ..inputs import load_node_data, resolve_num_nodes

SCIPY_MARKER_KEYS = ("format", "shape")


def npz_keys(path: str | os.PathLike) -> list[str] | None:
    """The array names of an ``.npz`` archive without loading them; ``None`` if not a zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return None
    return [name[: -len(".npy")] if name.endswith(".npy") else name for name in names]


def is_scipy_npz(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an archive written by ``scipy.sparse.save_npz`` (has ``format`` and
    ``shape`` arrays)."""
    keys = npz_keys(path)
    return keys is not None and all(key in keys for key in SCIPY_MARKER_KEYS)


def read_scipy_npz(
    path: str | os.PathLike, *, node_data: dict[str, str] | None = None
) -> Graph:
    """Read a square sparse matrix saved by ``scipy.sparse.save_npz`` as a homogeneous graph.

    Entry ``(i, j)`` is the edge ``i -> j`` (as ``dgl.from_scipy``), one per stored entry, in
    the matrix's COO order; the node count is the matrix size. The stored values become edge
    data ``weight`` unless every one is 1 (a plain adjacency carries no weights). ``node_data``
    maps feature names to ``.npy`` files with one row per node. Raises PartitionInputError
    naming the file when it is not such a matrix or not square.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise PartitionInputError(
            "no such file" if not os.path.exists(path) else "not a regular file", path=path
        )
    keys = npz_keys(path)
    if keys is None or not all(key in keys for key in SCIPY_MARKER_KEYS):
        raise PartitionInputError(
            "not a scipy.sparse.save_npz matrix: "
            + ("not an .npz (zip) archive" if keys is None
               else f"no 'format'/'shape' arrays (found keys: {', '.join(keys) or 'none'})"),
            path=path,
            hint="an .npz with src/dst or indptr/indices is dglctl's own layout: use --format npz",
        )
    import scipy.sparse

    try:
        matrix = scipy.sparse.load_npz(path)  # numpy.load with allow_pickle=False inside
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise PartitionInputError(
            f"unreadable scipy.sparse.save_npz matrix ({exc})", path=path
        ) from exc
    rows, cols = matrix.shape
    if rows != cols:
        raise PartitionInputError(
            f"a {rows} x {cols} matrix is not a graph's adjacency (it must be square: entry "
            "(i, j) is the edge i -> j)",
            path=path,
            hint="for a bipartite graph, build the square matrix [[0, A], [A.T, 0]] first",
        )
    coo = matrix.tocoo()
    src = np.asarray(coo.row, dtype=np.int64)
    dst = np.asarray(coo.col, dtype=np.int64)
    values = np.asarray(coo.data)
    edata = {} if values.size == 0 or bool(np.all(values == 1)) else {"weight": values}
    features = load_node_data(node_data)
    n = resolve_num_nodes(int(rows), src, dst, features, node_data, path)
    graph = Graph.homogeneous(src, dst, n, ndata=features, edata=edata)
    graph.validate(path)
    return graph
