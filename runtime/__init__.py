"""runtime: what every host of a job runs: graph servers, samplers and the trainer API.

DGL's names, so DGL users recognise them: ``initialize``, ``DistGraph``, ``DistTensor``,
``node_split``, ... Names are loaded on first use, so a server process (``runtime.server``)
never imports torch.
"""

from importlib import import_module
from typing import Any

from partitioner.version import __version__

_EXPORTS = {
    "initialize": "runtime.context",
    "exit_client": "runtime.context",
    "get_context": "runtime.context",
    "DistGraph": "runtime.dist_graph",
    "DistTensor": "runtime.dist_tensor",
    "PartitionPolicy": "runtime.view",
    "NodePartitionPolicy": "runtime.view",
    "EdgePartitionPolicy": "runtime.view",
    "DGLError": "runtime.view",
    "node_split": "runtime.split",
    "edge_split": "runtime.split",
    "NID": "runtime.sampling.block",
    "EID": "runtime.sampling.block",
    "DistEmbedding": "runtime.embedding",
    "sample_neighbors": "runtime.sampling.neighbor",
    "NeighborSampler": "runtime.sampling.neighbor",
    "MultiLayerNeighborSampler": "runtime.sampling.neighbor",
    "sample_etype_neighbors": "runtime.sampling.neighbor",
    "in_subgraph": "runtime.sampling.neighbor",
    "to_block": "runtime.sampling.graph",
    "SampledGraph": "runtime.sampling.graph",
    "negative_sampler": "runtime.loader.dataloading",
    "DistDataLoader": "runtime.loader.dataloader",
    "DistNodeDataLoader": "runtime.loader.dataloader",
    "Block": "runtime.sampling.block",
    "PairGraph": "runtime.sampling.graph",
    "DistEdgeDataLoader": "runtime.loader.edge_dataloader",
    "device": "runtime.trainer_device",
    "ddp_backend": "runtime.trainer_device",
}

# Modules under DGL's names, so that ``import runtime as dgl`` serves a DGL script's
# ``dgl.distributed.DistGraph``, ``dgl.dataloading.NeighborSampler`` and ``dgl.function``.
_MODULES = {
    "distributed": "runtime",
    "dataloading": "runtime.loader.dataloading",
    "function": "runtime.loader.function",
}

__all__ = ["__version__", *_EXPORTS, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return import_module(_MODULES[name])
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    return getattr(import_module(module), name)
