"""The part of every node of this rank's block: from a given assignment, a seeded random one,
or ParMETIS_V3_PartKway on the symmetric graph built across the ranks (one all-to-all, which
also counts in-degrees where they are a balance constraint)."""

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
        unbalanced: the weights asked for that the library does not balance (PT-Scotch
            balances the first only).
    """

    piece: np.ndarray
    balanced: list[str] = field(default_factory=list)
    library: str | None = None
    unbalanced: list[str] = field(default_factory=list)


def assign_block(comm: Any, graph: Graph, share: Share, num_parts: int, trainers: int, *,
                 method: str, assignment: str | Path | np.ndarray | None, seed: int,
                 imbalance: float, balance_train: bool, balance_edges: bool = False,
                 budget: int = DEFAULT_BUDGET) -> BlockAssignment:
    """Collective: the trainer piece of every node of this rank's block.

    ``assignment`` (a file or an array of every node's part) is used as is, dealt to trainer
    pieces as the single-machine partitioner deals it; ``method`` ``random`` draws the same
    permutation as the single-machine partitioner (so both write the same parts);
    ``parmetis`` partitions into ``num_parts * trainers`` pieces, balancing node count, the
    training nodes (``balance_train``) and in-degree (``balance_edges``), as the single-machine
    partitioner's METIS does; a library that balances only the first (PT-Scotch) is recorded
    as having balanced that one, and the report gives the balance reached on the others.
    """
    n = graph.total_nodes
    pieces = num_parts * trainers
    if assignment is not None:
        part = given_assignment(assignment, n, num_parts)
        return BlockAssignment(pieces_of(part, trainers)[share.homogeneous_ids()])
    if method == "random":
        return BlockAssignment(random_method.assign(n, pieces, seed=seed)[share.homogeneous_ids()])
    from ..methods.parmetis import part_kway

    xadj, adjncy, in_degree = symmetric_block(comm, graph, share, budget=budget,
                                              in_degree=balance_edges)
    weights, names = block_weights(comm, graph, share, balance_train, in_degree)
    if pieces == 1:
        return BlockAssignment(np.zeros(share.num_local, np.int64))
    got = part_kway(comm, share.vtxdist, xadj, adjncy, pieces, vweights=weights,
                    imbalance=imbalance)
    if got.library.balances_all:
        return BlockAssignment(got.part, names, got.library.flavour)
    return BlockAssignment(got.part, names[:1], got.library.flavour, names[1:])


def symmetric_block(comm: Any, graph: Graph, share: Share, *, budget: int = DEFAULT_BUDGET,
                    in_degree: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Collective: this rank's rows of the graph made undirected (both directions of every
    edge, no self-loops, no duplicates) as ``(xadj, adjncy, in-degrees)``: rows over its local
    ids, neighbours as rank-major ids (ParMETIS's numbering). Every rank sends each direction
    of its edges to the owner of its first end, once. With ``in_degree`` the same rows carry a
    flag for the destination's direction (self-loops sent that way only), so the owner counts
    each local node's in-degree over every edge type, as the input has them (duplicates and
    self-loops included); else the third item is None."""
    # Narrow columns while the ids fit: the pairs are the largest thing this phase holds.
    narrow = id_dtype(graph.total_nodes)
    small = np.int16 if share.size < 2**15 else np.int64
    owners, rows, others, incoming = [], [], [], []
    for e in range(len(graph.edges)):
        hs, hd = share.homogeneous_edges(graph, e)
        loop = hs == hd
        # (source -> destination) without self-loops; (destination -> source) with them when
        # they count towards in-degree (dropped on arrival), else without.
        for a, b, to_dst in ((hs[~loop], hd[~loop], False),
                             (hd, hs, True) if in_degree else (hd[~loop], hs[~loop], True)):
            owner, local = share.locate(a)
            owners.append(owner.astype(small))
            rows.append(local.astype(narrow))
            others.append(share.rank_major(b).astype(narrow))
            if in_degree:
                incoming.append(np.full(len(a), to_dst, np.bool_))
            del owner, local
        del hs, hd, loop
    owner = np.concatenate(owners) if owners else np.empty(0, small)
    local = np.concatenate(rows) if rows else np.empty(0, narrow)
    v = np.concatenate(others) if others else np.empty(0, narrow)
    columns = [local, v]
    if in_degree:
        columns.append(np.concatenate(incoming) if incoming else np.empty(0, np.bool_))
    del owners, rows, others, incoming, local, v
    received, _ = exchange(comm, owner, columns, budget=budget)
    del owner, columns
    n_local = share.num_local
    local, v = received[0], received[1]
    degrees = None
    if in_degree:
        degrees = np.bincount(local[received[2]], minlength=n_local).astype(np.int64)
        not_loop = local.astype(np.int64) + share.vtxdist[share.rank] != v
        local, v = local[not_loop], v[not_loop]
        del not_loop
    del received
    key = np.unique(local.astype(np.int64) * np.int64(graph.total_nodes) + v)
    del local, v
    row, col = np.divmod(key, np.int64(graph.total_nodes))
    xadj = np.zeros(n_local + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=n_local), out=xadj[1:])
    return xadj, col, degrees


def block_weights(comm: Any, graph: Graph, share: Share, balance_train: bool,
                  in_degree: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """Vertex weights of the block's nodes (``(local nodes, ncon)``) and their names: 1
    (nodes), the training mask where the graph has one and ``balance_train``, and
    ``in_degree`` when given (capped at 2**31 - 1, as the single-machine weights). A column
    no rank has any weight in is dropped, as ParMETIS refuses a constraint without weight
    (the same decision on every rank: collective)."""
    cols = [np.ones(share.num_local, np.int64)]
    names = ["nodes"]
    if balance_train and any("train_mask" in graph.ndata.get(t, {}) for t in graph.ntypes):
        train = np.zeros(share.num_local, np.int64)
        for t, lo, hi, at in share.type_slices():
            mask = graph.ndata.get(graph.ntypes[t], {}).get("train_mask")
            if mask is not None:
                train[at:at + hi - lo] = np.asarray(mask[lo:hi]).astype(bool)
        cols.append(train)
        names.append("train")
    if in_degree is not None:
        cols.append(np.minimum(in_degree, 2**31 - 1))
        names.append("in-degree")
    keep = [i for i, c in enumerate(cols) if comm.allreduce(int(c.any()))]
    return np.stack([cols[i] for i in keep], axis=1), [names[i] for i in keep]
