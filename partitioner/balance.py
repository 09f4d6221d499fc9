"""Vertex weights for METIS: the balance constraints of a partitioning."""

from __future__ import annotations

import numpy as np

from .errors import PartitionOptionError
from .graph import Graph


def balance_weights(
    graph: Graph,
    *,
    balance_train: bool = True,
    balance_ntypes: str | np.ndarray | None = None,
    balance_edges: bool = False,
    in_degrees: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Vertex weight columns for METIS (``(n, ncon)`` int32) and a name for each column.

    Columns: node count (one per node type for heterogeneous graphs, as DGL balances types),
    the ``train_mask`` where present, one 0/1 column per distinct value of the node data named
    by ``balance_ntypes`` (or of ``balance_ntypes`` itself when it is an array with one value
    per homogeneous node id, as DGL takes it), and in-degree with ``balance_edges``. All-zero columns are dropped,
    since METIS rejects a constraint with no weight. ``in_degrees`` (per edge type, the in-degree
    of each destination-type node) saves counting them again where the caller has them.
    """
    n = graph.total_nodes
    offsets = graph.node_offsets()
    cols: list[np.ndarray] = []
    names: list[str] = []
    if graph.is_homogeneous or len(graph.ntypes) == 1:
        cols.append(np.ones(n, np.int32))
        names.append("nodes")
    else:
        for t, ntype in enumerate(graph.ntypes):
            c = np.zeros(n, np.int32)
            c[offsets[t] : offsets[t + 1]] = 1
            cols.append(c)
            names.append(f"nodes:{ntype}")
    if balance_train:
        c = np.zeros(n, np.int32)
        found = False
        for t, ntype in enumerate(graph.ntypes):
            mask = graph.ndata.get(ntype, {}).get("train_mask")
            if mask is not None:
                c[offsets[t] : offsets[t + 1]] = mask.astype(bool)
                found = True
        if found:
            cols.append(c)
            names.append("train")
    if balance_ntypes is not None and not isinstance(balance_ntypes, str):
        # DGL's form: one value (a class, a type, a 0/1 mask) per homogeneous node id.
        values = np.asarray(balance_ntypes).astype(np.int64).reshape(-1)
        if len(values) != n:
            raise PartitionOptionError(
                f"balance_ntypes has {len(values)} entries but the graph has {n} nodes",
                hint="give one value per node (homogeneous ids), or the name of node data",
            )
        for v in np.unique(values):
            cols.append((values == v).astype(np.int32))
            names.append(f"balance_ntypes={v}")
    elif balance_ntypes is not None:
        values = np.full(n, -1, np.int64)
        found = False
        for t, ntype in enumerate(graph.ntypes):
            arr = graph.ndata.get(ntype, {}).get(balance_ntypes)
            if arr is not None:
                if arr.ndim != 1:
                    raise PartitionOptionError(
                        f"--balance-ntypes {balance_ntypes}: node data {ntype}/{balance_ntypes} "
                        f"must be one value per node, has shape {arr.shape}"
                    )
                values[offsets[t] : offsets[t + 1]] = arr.astype(np.int64)
                found = True
        if not found:
            known = sorted({k for feats in graph.ndata.values() for k in feats})
            raise PartitionOptionError(
                f"--balance-ntypes {balance_ntypes}: no node data of that name",
                hint=f"node data in this graph: {', '.join(known) or 'none'}",
            )
        for v in np.unique(values[values >= 0]):
            cols.append((values == v).astype(np.int32))
            names.append(f"{balance_ntypes}={v}")
    if balance_edges:
        deg = np.zeros(n, np.int64)
        for e, (etype, (_, dst)) in enumerate(graph.edges.items()):
            d = graph.ntypes.index(etype[2])
            deg[offsets[d] : offsets[d + 1]] += (
                np.bincount(dst, minlength=graph.num_nodes[etype[2]])
                if in_degrees is None else in_degrees[e]
            )
        cols.append(np.minimum(deg, 2**31 - 1).astype(np.int32))
        names.append("in-degree")
    keep = [i for i, c in enumerate(cols) if c.any()]
    weights = np.ascontiguousarray(np.stack([cols[i] for i in keep], axis=1))
    return weights, [names[i] for i in keep]
