"""The names of a machine's partition arrays in shared memory, and the copy that puts them there.

The main server of a machine copies its part into shared memory once (``load_into_shm``);
backup servers, trainers and samplers on the host find the same arrays by these names.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from partitioner.format import PartConfig, load_array
from partitioner.loader import load_partition

from .shm import ShmArena

# The out-CSR's three arrays, in the order ``Partition.csr`` returns them.
OUT_CSR = ("out_indptr", "out_indices", "out_eids")


def graph_tensor(etype: str, what: str) -> str:
    """Shared-array name of a part's graph component of ``etype``: ``indptr`` or ``indices`` of
    the CSC, ``out_indptr``, ``out_indices`` or ``out_eids`` of the out-CSR."""
    return f"graph:{etype}:{what}"


def orig_tensor(ntype: str) -> str:
    """Shared-array name of the input ids of a machine's owned nodes of ``ntype``."""
    return f"orig:{ntype}"


def node_policy(ntype: str) -> str:
    """Partition policy name of rows keyed by nodes of ``ntype``."""
    return f"node:{ntype}"


def edge_policy(etype: str) -> str:
    """Partition policy name of rows keyed by edges of canonical ``etype`` ("src:e:dst")."""
    return f"edge:{etype}"


def feature_policy(kind: str, key: str) -> str:
    """Policy of a stored feature ``key``: ``"ntype/name"`` (node) or ``"src:e:dst/name"``."""
    return node_policy(key.split("/", 1)[0]) if kind == "node" else \
        edge_policy(key.rsplit("/", 1)[0])


def load_into_shm(arena: ShmArena, config: PartConfig, machine_id: int) -> dict[str, Any]:
    """Copy the machine's partition into shared memory; return the manifest describing it."""
    part = load_partition(config, machine_id)
    tensors: dict[str, dict[str, Any]] = {}
    book = part.book
    for ntype, rel in config.orig_nids.items():
        t = book.nodes.type_index(ntype)
        lo, hi = book.nodes.typed_start[machine_id, t], book.nodes.typed_start[machine_id + 1, t]
        arena.put(orig_tensor(ntype), np.asarray(load_array(config, rel)[lo:hi]))
    for etype in config.etypes:
        indptr, indices = part.csc(etype)
        # The shards as opened (whole-file mappings): put() has the kernel copy the files.
        for what, arr in (("indptr", indptr), ("indices", indices)):
            arena.put(graph_tensor(etype, what), arr)
        if part.has_out_edges:
            for what, arr in zip(OUT_CSR, part.csr(etype), strict=True):
                arena.put(graph_tensor(etype, what), arr)
    for kind, feats in (("node", part.node_feats()), ("edge", part.edge_feats())):
        for key, arr in feats.items():
            arena.put(key, arr)
            tensors[key] = {"policy": feature_policy(kind, key), "dtype": arr.dtype.str,
                            "shape": list(arr.shape[1:])}
    return {"tensors": tensors, "pid": os.getpid(), "time": time.time()}
