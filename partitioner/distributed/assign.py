"""The part of every node of this rank's block: from a given assignment, a seeded random one,
or ParMETIS_V3_PartKway on the symmetric graph built across the ranks (one all-to-all)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..assignment import given_assignment, pieces_of
from ..graph import Graph
from ..methods import random as random_method
from ..relabel import id_dtype
from .exchange import DEFAULT_BUDGET, exchange
from .share import Share


@dataclass
class BlockAssignment:
    """This rank's nodes' trainer pieces (``part * trainers + k``) and what made them.

    Attributes:
        piece: per local node of the rank (:class:`~.share.Share`), its piece.
        balanced: the weights the method balanced (names, as the config's ``balance``).
        library: the ParMETIS library's flavour, when one ran.
    """

    piece: np.ndarray
    balanced: list[str] = field(default_factory=list)
    library: str | None = None


def assign_block(comm: Any, graph: Graph, share: Share, num_parts: int, trainers: int, *,
                 method: str, assignment: str | Path | np.ndarray | None, seed: int,
                 imbalance: float, balance_train: bool,
                 budget: int = DEFAULT_BUDGET) -> BlockAssignment:
    """Collective: the trainer piece of every node of this rank's block.

    ``assignment`` (a file or an array of every node's part) is used as is, dealt to trainer
    pieces as the single-machine partitioner deals it; ``method`` ``random`` draws the same
    permutation as the single-machine partitioner (so both write the same parts);
    ``parmetis`` partitions into ``num_parts * trainers`` pieces.
    """
    n = graph.total_nodes
    pieces = num_parts * trainers
    if assignment is not None:
        # Every rank reads and checks the whole file: the same error on every rank.
        part = given_assignment(assignment, n, num_parts)
        return BlockAssignment(pieces_of(part, trainers)[share.homogeneous_ids()])
    if method == "random":
        return BlockAssignment(random_method.assign(n, pieces, seed=seed)[share.homogeneous_ids()])
    from ..methods.parmetis import part_kway

    xadj, adjncy = symmetric_block(comm, graph, share, budget=budget)
    weights, names = _weights(graph, share, balance_train)
    if pieces == 1:
        return BlockAssignment(np.zeros(share.num_local, np.int64))
    got = part_kway(comm, share.vtxdist, xadj, adjncy, pieces, vweights=weights,
                    imbalance=imbalance)
    if not got.library.balances_all:
        names = names[:1]
    return BlockAssignment(got.part, names, got.library.flavour)


def symmetric_block(comm: Any, graph: Graph, share: Share, *,
                    budget: int = DEFAULT_BUDGET) -> tuple[np.ndarray, np.ndarray]:
    """Collective: this rank's rows of the graph made undirected (both directions of every
    edge, no self-loops, no duplicates) as ``(xadj, adjncy)``: rows over its local ids,
    neighbours as rank-major ids (ParMETIS's numbering). Every rank sends each direction of
    its edges to the owner of its first end, once."""
    # Narrow columns while the ids fit: the pairs are the largest thing this phase holds.
    narrow = id_dtype(graph.total_nodes)
    small = np.int16 if share.size < 2**15 else np.int64
    owners, rows, others = [], [], []
    for e in range(len(graph.edges)):
        hs, hd = share.homogeneous_edges(graph, e)
        keep = hs != hd
        hs, hd = hs[keep], hd[keep]
        for a, b in ((hs, hd), (hd, hs)):
            owner, local = share.locate(a)
            owners.append(owner.astype(small))
            rows.append(local.astype(narrow))
            others.append(share.rank_major(b).astype(narrow))
            del owner, local
        del hs, hd, keep
    owner = np.concatenate(owners) if owners else np.empty(0, small)
    local = np.concatenate(rows) if rows else np.empty(0, narrow)
    v = np.concatenate(others) if others else np.empty(0, narrow)
    del owners, rows, others
    (local, v), _ = exchange(comm, owner, [local, v], budget=budget)
    del owner
    n_local = share.num_local
    key = np.unique(local.astype(np.int64) * np.int64(graph.total_nodes) + v)
    del local, v
    row, col = np.divmod(key, np.int64(graph.total_nodes))
    xadj = np.zeros(n_local + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=n_local), out=xadj[1:])
    return xadj, col


def _weights(graph: Graph, share: Share, balance_train: bool) -> tuple[np.ndarray, list[str]]:
    """Per node of the block: 1 (nodes), and its training mask where the graph has one."""
    ones = np.ones(share.num_local, np.int64)
    if not balance_train or not any("train_mask" in graph.ndata.get(t, {})
                                    for t in graph.ntypes):
        return ones[:, None], ["nodes"]
    train = np.zeros(share.num_local, np.int64)
    for t, lo, hi, at in share.type_slices():
        mask = graph.ndata.get(graph.ntypes[t], {}).get("train_mask")
        if mask is not None:
            train[at:at + hi - lo] = np.asarray(mask[lo:hi]).astype(bool)
    if not train.any():
        return ones[:, None], ["nodes"]
    return np.stack([ones, train], axis=1), ["nodes", "train"]
