"""In-memory graphs the partitioner takes besides :class:`Graph`: scipy sparse matrices,
``(src, dst)`` arrays, PyG ``Data`` / ``HeteroData``; and what every edge-list input shares:
the node count (largest id + 1, refused when far sparser than the edges) and ``.npy`` node data.

No import of scipy, torch or torch_geometric happens here: objects are recognised by their
attributes (a PyG object by ``edge_index`` / ``node_types``), so a process that never builds
one never loads those packages.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import PartitionInputError
from .graph import Graph

_PYG_SKIP = {"edge_index", "num_nodes", "adj_t", "ptr", "batch"}

# A node count taken as largest id + 1 is refused (id_space_too_sparse) when it exceeds this
# many times the distinct endpoints the edges can have (two per edge) ...
SPARSE_ID_FACTOR = 8
# ... and partitioning would allocate more than this for it, at _BYTES_PER_NODE per node: the
# part of each node, the random permutation, the new-of-old and old-of-new id maps (int64).
SPARSE_ID_BYTES = 1 << 30
_BYTES_PER_NODE = 32


def id_space_too_sparse(num_nodes: int, num_edges: int) -> bool:
    """Whether ``num_nodes``, taken as largest id + 1, is too sparse to partition as is.

    The rule: refused when ``num_nodes > SPARSE_ID_FACTOR * 2 * num_edges`` (8 node slots per
    endpoint, so at most one in 8 ids can be used) *and* ``num_nodes * 32`` bytes exceed
    ``SPARSE_ID_BYTES`` (1 GiB, about 33.5M nodes): sparse ids on a small graph cost little
    and stay allowed. Only for an inferred count: one the user gives is taken as meant.
    """
    return (num_nodes > SPARSE_ID_FACTOR * 2 * num_edges
            and num_nodes * _BYTES_PER_NODE > SPARSE_ID_BYTES)


def sparse_ids_error(
    max_id: int, num_edges: int, *, path: str, line: int | None = None, where: str = ""
) -> PartitionInputError:
    """The error for a largest node id that :func:`id_space_too_sparse` refuses; ``where``
    (e.g. ``" in edge line '0 3000000000'"``) follows the id in the message."""
    n = max_id + 1
    return PartitionInputError(
        f"largest node id {max_id}{where} makes {n:,} nodes for {num_edges:,} edge(s) with at "
        f"most {2 * num_edges:,} distinct endpoints: partitioning would allocate about "
        f"{n * _BYTES_PER_NODE / 2**30:.1f} GiB for ids no edge uses (refused above "
        f"{SPARSE_ID_FACTOR} ids per endpoint and {SPARSE_ID_BYTES >> 30} GiB)",
        path=path,
        line=line,
        hint="node ids must be compact, 0..N-1: relabel them (e.g. numpy.unique(ids, "
             "return_inverse=True)); if the graph really has that many nodes, pass num_nodes "
             "(dglctl partition --num-nodes) to say so",
    )


def to_numpy(x: Any) -> np.ndarray:
    """A numpy view of an array-like (torch tensors are detached and moved to the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _features(feats: dict[str, Any] | None) -> dict[str, np.ndarray]:
    return {str(k): to_numpy(v) for k, v in (feats or {}).items()}


def as_graph(
    obj: Any,
    num_nodes: int | None = None,
    ndata: dict[str, Any] | None = None,
    edata: dict[str, Any] | None = None,
) -> Graph:
    """The :class:`Graph` for ``obj``; raises PartitionInputError for anything else.

    Accepted: a ``Graph`` (returned as is); a square scipy sparse matrix (entry ``(i, j)`` is
    the edge ``i -> j``, as ``dgl.from_scipy``); a ``(src, dst)`` pair of numpy arrays or torch
    tensors (``num_nodes`` defaults to the largest id + 1, as ``dgl.graph``, refused when far
    beyond what the edges can use: :func:`id_space_too_sparse`); a PyG ``Data``
    (``edge_index``, node-level attributes such as ``x``, ``y``, ``train_mask`` become node
    data under the same names, edge-level ones such as ``edge_attr`` edge data) or
    ``HeteroData`` (one node type per node store, one canonical edge type per edge store).
    ``ndata`` / ``edata`` add features to a homogeneous input (one row per node / edge).
    """
    if isinstance(obj, Graph):
        return obj
    if hasattr(obj, "node_types") and hasattr(obj, "edge_types"):
        return _from_pyg_hetero(obj)
    if hasattr(obj, "edge_index"):
        src, dst, n, nd, ed = _from_pyg_data(obj)
    elif hasattr(obj, "tocoo") and hasattr(obj, "shape"):
        coo = obj.tocoo()
        if coo.shape[0] != coo.shape[1]:
            raise PartitionInputError(
                f"a scipy matrix of shape {coo.shape} is not a graph's adjacency (not square)",
                path="<scipy matrix>",
            )
        src, dst, n, nd, ed = coo.row, coo.col, int(coo.shape[0]), {}, {}
    elif isinstance(obj, tuple | list) and len(obj) == 2:
        src, dst = to_numpy(obj[0]).reshape(-1), to_numpy(obj[1]).reshape(-1)
        n = int(max(src.max(initial=-1), dst.max(initial=-1)) + 1)
        if num_nodes is None and id_space_too_sparse(n, len(src)):
            raise sparse_ids_error(n - 1, len(src), path="<(src, dst) arrays>")
        nd, ed = {}, {}
    else:
        raise PartitionInputError(
            f"cannot partition a {type(obj).__name__}",
            path="<graph>",
            hint="pass a partitioner.Graph, a scipy sparse matrix, (src, dst) arrays, or a "
                 "PyG Data / HeteroData",
        )
    n = int(num_nodes) if num_nodes is not None else n
    nd.update(_features(ndata))
    ed.update(_features(edata))
    graph = Graph.homogeneous(np.asarray(src, np.int64), np.asarray(dst, np.int64), n, nd, ed)
    graph.validate("<in-memory graph>")
    return graph


def _from_pyg_data(data: Any) -> tuple[np.ndarray, np.ndarray, int, dict, dict]:
    edge_index = to_numpy(data.edge_index)
    n = int(data.num_nodes)
    m = edge_index.shape[1]
    ndata: dict[str, np.ndarray] = {}
    edata: dict[str, np.ndarray] = {}
    for key, value in _items(data):
        if key in _PYG_SKIP or not hasattr(value, "shape") or len(value.shape) == 0:
            continue
        if _is_edge_attr(data, key, value, n, m):
            edata[key] = to_numpy(value)
        elif value.shape[0] == n:
            ndata[key] = to_numpy(value)
    return edge_index[0], edge_index[1], n, ndata, edata


def _from_pyg_hetero(data: Any) -> Graph:
    num_nodes = {str(t): int(data[t].num_nodes) for t in data.node_types}
    edges, ndata, edata = {}, {}, {}
    for t in data.node_types:
        ndata[str(t)] = {k: to_numpy(v) for k, v in _items(data[t])
                         if k not in _PYG_SKIP and hasattr(v, "shape") and len(v.shape)
                         and v.shape[0] == num_nodes[str(t)]}
    for et in data.edge_types:
        cet = tuple(str(x) for x in et)
        store = data[et]
        ei = to_numpy(store.edge_index)
        edges[cet] = (ei[0].astype(np.int64), ei[1].astype(np.int64))
        edata[cet] = {k: to_numpy(v) for k, v in _items(store)
                      if k not in _PYG_SKIP and hasattr(v, "shape") and len(v.shape)
                      and v.shape[0] == ei.shape[1]}
    graph = Graph(num_nodes, edges, ndata, edata)  # type: ignore[arg-type]
    graph.validate("<HeteroData>")
    return graph


def _items(store: Any) -> list[tuple[str, Any]]:
    """The attributes of a PyG Data or storage (``items()``, else its ``__dict__``)."""
    if hasattr(store, "items"):
        return [(str(k), v) for k, v in store.items()]
    return [(k, v) for k, v in vars(store).items() if not k.startswith("_")]


def _is_edge_attr(data: Any, key: str, value: Any, n: int, m: int) -> bool:
    if hasattr(data, "is_edge_attr"):
        return bool(data.is_edge_attr(key))
    # Without PyG's own answer: edge-sized and named like an edge attribute, or not node-sized.
    return value.shape[0] == m and (key.startswith("edge_") or value.shape[0] != n)


def read_npy(path: str | os.PathLike, what: str = "") -> np.ndarray:
    """A .npy file memory-mapped read-only (its pages are read when a phase needs them, as an
    npz member's), without pickles; a PartitionInputError naming the file (and ``what``, e.g.
    ``"node feature 'x': "``) when it cannot be read as an array."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PartitionInputError(f"{what}not a readable .npy array ({exc})",
                                  path=os.fspath(path)) from exc
    return arr


def load_node_data(node_data: dict[str, str] | None) -> dict[str, np.ndarray]:
    """Load ``name -> .npy path`` feature files; errors name the .npy file."""
    loaded: dict[str, np.ndarray] = {}
    for name, npy in (node_data or {}).items():
        npy = os.fspath(npy)
        if not os.path.exists(npy):
            raise PartitionInputError(f"node feature {name!r}: no such file", path=npy)
        arr = read_npy(npy, f"node feature {name!r}: ")
        if not isinstance(arr, np.ndarray) or arr.ndim == 0:
            raise PartitionInputError(
                f"node feature {name!r}: expected an array with one row per node", path=npy
            )
        loaded[name] = arr
    return loaded


def resolve_num_nodes(
    num_nodes: int | None,
    src: np.ndarray,
    dst: np.ndarray,
    features: dict[str, np.ndarray],
    feature_paths: dict[str, str] | None,
    path: str,
) -> int:
    """Node count: given, else max id + 1, or the feature row count when that is larger.

    Features decide when they agree, since trailing nodes without edges appear in no edge.
    """
    max_id = int(max(src.max(initial=-1), dst.max(initial=-1)))
    if num_nodes is None:
        rows = {arr.shape[0] for arr in features.values()}
        n = max(max_id + 1, rows.pop()) if len(rows) == 1 else max_id + 1
    else:
        n = int(num_nodes)
    for name, arr in features.items():
        if arr.shape[0] != n:
            src_file = (feature_paths or {}).get(name, path)
            raise PartitionInputError(
                f"node feature {name!r} has {arr.shape[0]} rows but the graph has {n} nodes",
                path=os.fspath(src_file),
                hint="give one row per node, in node id order",
            )
    return n
