"""``node_split`` / ``edge_split``: give each trainer its share of the training ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from partitioner.partition_book import RangePartitionBook

from .context import get_context
from .env import torch_rank_world


def _mask_ids(mask: Any, total: int) -> np.ndarray:
    if hasattr(mask, "part_policy"):  # a DistTensor: read it whole (one bool per id)
        values = mask[np.arange(total)].numpy()
    else:
        values = np.asarray(torch.as_tensor(mask).numpy())
    if values.shape[0] != total:
        raise ValueError(f"mask has {values.shape[0]} entries but there are {total} ids")
    return np.flatnonzero(values.reshape(total, -1)[:, 0])


def _split(ids: np.ndarray, rank: int, world: int) -> torch.Tensor:
    # ids are sorted and ranges are part-major, so contiguous chunks keep each trainer's ids
    # mostly on its own machine (ranks are machine-major), and sizes differ by at most one.
    bounds = np.linspace(0, len(ids), world + 1).round().astype(np.int64)
    return torch.from_numpy(ids[bounds[rank]:bounds[rank + 1]].copy())


def _book(partition_book: RangePartitionBook | None) -> RangePartitionBook:
    if partition_book is not None:
        return partition_book
    return get_context().current_graph().get_partition_book()


def _share(ids: np.ndarray, owner: Any, num_parts: int, rank: int | None,
           force_even: bool) -> torch.Tensor:
    rank, world = torch_rank_world(rank)
    if force_even:
        return _split(ids, rank, world)
    per_machine = max(1, world // num_parts)
    machine, local_rank = divmod(rank, per_machine)
    return _split(ids[owner(ids) == machine], local_rank, per_machine)


def node_split(
    nodes: Any,
    partition_book: RangePartitionBook | None = None,
    ntype: str = "_N",
    rank: int | None = None,
    force_even: bool = True,
    node_trainer_ids: Any = None,
) -> torch.Tensor:
    """The node ids (per-type) selected by boolean ``nodes`` that this trainer should train on.

    Every selected id goes to exactly one trainer; with ``force_even`` every trainer gets the
    same count (give or take one), so DDP never waits for a trainer that ran out. Without it,
    a trainer gets the selected ids its own machine owns, split among the machine's trainers.
    """
    book = _book(partition_book)
    ids = _mask_ids(nodes, book.num_nodes(ntype))
    return _share(ids, lambda x: book.nid2partid(x, ntype), book.num_partitions(), rank,
                  force_even)


def edge_split(
    edges: Any,
    partition_book: RangePartitionBook | None = None,
    etype: Any = None,
    rank: int | None = None,
    force_even: bool = True,
) -> torch.Tensor:
    """Like :func:`node_split` for edge ids (per-type ids of ``etype``)."""
    book = _book(partition_book)
    ids = _mask_ids(edges, book.num_edges(etype))
    return _share(ids, lambda x: book.eid2partid(x, etype), book.num_partitions(), rank,
                  force_even)
