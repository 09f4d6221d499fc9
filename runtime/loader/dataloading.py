"""``dgl.dataloading``'s names for distributed training, so that a DGL script changes only its
import (``from runtime.loader import dataloading`` instead of ``import dgl.dataloading``):
``NeighborSampler``, ``MultiLayerNeighborSampler``, ``negative_sampler.Uniform``,
``DistNodeDataLoader``, ``DistEdgeDataLoader``, ``DistDataLoader``.
"""

from __future__ import annotations

from ..sampling.neighbor import MultiLayerNeighborSampler, NeighborSampler
from . import negative_sampler
from .dataloader import DistDataLoader, DistNodeDataLoader
from .edge_dataloader import DistEdgeDataLoader

__all__ = ["DistDataLoader", "DistEdgeDataLoader", "DistNodeDataLoader",
           "MultiLayerNeighborSampler", "NeighborSampler", "negative_sampler"]
