"""DGL's ``load_partition_feats``: one part's owned-node and inner-edge features as torch tensors.

Apart from the loader because it imports torch (when called): a server reads features through
:class:`partitioner.loader.Partition` and never loads torch.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .format import PartConfig
from .loader import load_partition


def load_partition_feats(
    part_config: str | os.PathLike[str] | PartConfig,
    part_id: int,
    load_nodes: bool = True,
    load_edges: bool = True,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(node_feats, edge_feats)`` of part ``part_id``, as DGL returns them.

    Node features are keyed ``"ntype/name"`` (rows: the part's owned nodes of that type, in
    per-type id order), edge features ``"src:etype:dst/name"`` (rows: the part's inner edges of
    that type, in edge id order); each is an in-memory torch tensor. ``load_nodes=False`` /
    ``load_edges=False`` give None in that place, as in DGL.
    """
    import torch

    part = load_partition(part_config, part_id)
    node = edge = None
    if load_nodes:
        node = {k: torch.from_numpy(np.array(v)) for k, v in part.node_feats().items()}
    if load_edges:
        edge = {k: torch.from_numpy(np.array(v)) for k, v in part.edge_feats().items()}
    return node, edge
