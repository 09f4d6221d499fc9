"""``node_split`` / ``edge_split``: give each trainer its share of the training ids (DGL's API).

Ranks are machine-major (ranks ``m*k .. m*k+k-1`` run on machine ``m`` with ``k`` trainers per
machine), as the launcher starts them and as DGL assumes. Shares come back as int64 torch
tensors of per-type ids, whatever the mask was (a bool tensor, a numpy array or a DistTensor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from partitioner.partition_book import RangePartitionBook

from .context import get_context
from .env import torch_rank_world

if TYPE_CHECKING:
    from .dist_tensor import DistTensor


def _whole(values: Any, total: int, what: str) -> np.ndarray:
    """Every entry of a per-id vector (a DistTensor is read whole) as numpy, length-checked."""
    if hasattr(values, "part_policy"):  # a DistTensor
        out = values[np.arange(total)].numpy()
    else:
        out = np.asarray(torch.as_tensor(values).cpu().numpy())
    if out.shape[0] != total:
        raise ValueError(f"{what} has {out.shape[0]} entries but there are {total} ids")
    return out.reshape(total, -1)[:, 0]


def _bounds(n: int, k: int) -> np.ndarray:
    """``k + 1`` offsets cutting ``n`` items into ``k`` runs whose sizes differ by at most one."""
    return np.linspace(0, n, k + 1).round().astype(np.int64)


def _chunk(ids: np.ndarray, i: int, k: int) -> np.ndarray:
    b = _bounds(len(ids), k)
    return ids[b[i]:b[i + 1]]


def _book(partition_book: RangePartitionBook | None, mask: Any) -> RangePartitionBook:
    if partition_book is not None:
        return partition_book
    if hasattr(mask, "part_policy"):  # DGL: a DistTensor's own partition book
        return mask.part_policy.partition_book
    return get_context().current_graph().get_partition_book()


def _by_trainer_id(part_ids: np.ndarray, trainer_id: np.ndarray, machine: int,
                   per_machine: int, local_rank: int) -> np.ndarray:
    """DGL's ``_split_by_trainer_id``: of this machine's share, the ids whose trainer runs on
    this machine, ordered by trainer and cut evenly, plus an even cut of the others."""
    owner = trainer_id[part_ids]
    here = owner // per_machine == machine
    local, remote = part_ids[here], part_ids[~here]
    local = local[np.argsort(owner[here] % per_machine, kind="stable")]
    return np.concatenate([_chunk(local, local_rank, per_machine),
                           _chunk(remote, local_rank, per_machine)])


def _share(ids: np.ndarray, owner: Callable[[np.ndarray], np.ndarray], num_parts: int,
           rank: int | None, force_even: bool, trainer_ids: Any, total: int) -> torch.Tensor:
    rank, world = torch_rank_world(rank)
    per_machine = max(1, world // num_parts)
    machine, local_rank = divmod(rank, per_machine)
    if not force_even:
        # Every selected id this trainer's machine owns, cut among the machine's trainers.
        mine = _chunk(ids[owner(ids) == machine], local_rank, per_machine)
    elif trainer_ids is None or per_machine == 1:
        # Ids are sorted and ranges part-major, so even runs keep each trainer's ids mostly
        # on its own machine; the run of machine m is DGL's even share of part m.
        mine = _chunk(ids, rank, world)
    else:
        if world % num_parts:
            raise ValueError(f"{world} trainers do not split evenly over {num_parts} machines")
        tid = _whole(trainer_ids, total, "trainer ids").astype(np.int64)
        most = int(tid.max()) + 1 if len(tid) else 0
        if most > world:  # partitioned for more trainers than run: merge neighbours (DGL)
            if most % world:
                raise ValueError(f"trainer ids go up to {most - 1}, which does not fold onto "
                                 f"{world} trainers (it must be a multiple)")
            tid //= most // world
        mine = _by_trainer_id(_chunk(ids, machine, num_parts), tid, machine, per_machine,
                              local_rank)
    return torch.from_numpy(np.ascontiguousarray(mine, dtype=np.int64))


def node_split(
    nodes: Any,
    partition_book: RangePartitionBook | None = None,
    ntype: str = "_N",
    rank: int | None = None,
    force_even: bool = True,
    node_trainer_ids: Any = None,
) -> torch.Tensor:
    """The node ids (per-type) selected by boolean ``nodes`` that this trainer should train on.

    Every selected id goes to exactly one trainer. With ``force_even`` every trainer gets the
    same count (give or take one), so DDP never waits for a trainer that ran out; with
    ``node_trainer_ids`` (e.g. ``g.nodes[ntype].data["trainer_id"]``, written by
    ``partition_graph(num_trainers_per_machine=k)``) each machine's share goes to the trainers
    those ids name, as DGL does. Without ``force_even``, a trainer gets the selected ids its
    own machine owns, split among the machine's trainers. Returns an int64 tensor.
    """
    book = _book(partition_book, nodes)
    total = book.num_nodes(ntype)
    ids = np.flatnonzero(_whole(nodes, total, "the node mask"))
    return _share(ids, lambda x: book.nid2partid(x, ntype), book.num_partitions(), rank,
                  force_even, node_trainer_ids, total)


def edge_split(
    edges: Any,
    partition_book: RangePartitionBook | None = None,
    etype: Any = "_E",
    rank: int | None = None,
    force_even: bool = True,
    edge_trainer_ids: Any = None,
) -> torch.Tensor:
    """Like :func:`node_split` for edge ids (per-type ids of ``etype``); ``edge_trainer_ids``
    is e.g. ``g.edges[etype].data["trainer_id"]``. Returns an int64 tensor."""
    book = _book(partition_book, edges)
    total = book.num_edges(etype)
    ids = np.flatnonzero(_whole(edges, total, "the edge mask"))
    return _share(ids, lambda x: book.eid2partid(x, etype), book.num_partitions(), rank,
                  force_even, edge_trainer_ids, total)


def trainer_share(tensor: DistTensor, rank: int) -> np.ndarray:
    """The ids of ``tensor``'s rows that trainer ``rank`` saves (sorted, int64).

    The rows this trainer's machine owns by the partition book, split among that machine's
    trainers by ``id % trainers_per_machine`` (``rank % trainers_per_machine`` being the
    trainer's place on its machine, as ``dglctl launch`` numbers ranks). Over every trainer of
    the job the shares hold each row exactly once; standalone (one partition, no servers) the
    one trainer's share is every row. Sparse optimizers (``runtime.optim``) and checkpoints
    (``runtime.checkpoint``) save rows by this rule.
    """
    env = tensor.store.env
    per_machine = env.num_trainers if env is not None else 1
    policy = tensor.part_policy
    book = policy.partition_book
    ids: np.ndarray = np.asarray((book.partid2nids if policy.is_node else book.partid2eids)(
        policy.part_id, policy.type_name), np.int64)
    if per_machine > 1:
        ids = ids[ids % per_machine == rank % per_machine]
    return ids
