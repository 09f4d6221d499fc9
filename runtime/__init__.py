"""runtime: what every host of a job runs: graph servers, samplers and the trainer API.

DGL's names, so DGL users recognise them: ``initialize``, ``DistGraph``, ``DistTensor``,
``node_split``, ... Names are loaded on first use, so a server process (``runtime.server``)
never imports torch.
"""

from importlib import import_module
from typing import Any

from partitioner import __version__

_EXPORTS = {
    "initialize": "runtime.dist_graph",
    "exit_client": "runtime.dist_graph",
    "DistGraph": "runtime.dist_graph",
    "DistTensor": "runtime.dist_tensor",
    "node_split": "runtime.split",
    "edge_split": "runtime.split",
    "NID": "runtime.dist_graph",
    "EID": "runtime.dist_graph",
    "DistEmbedding": "runtime.embedding",
    "sample_neighbors": "runtime.neighbor_sampler",
    "NeighborSampler": "runtime.neighbor_sampler",
    "DistDataLoader": "runtime.dataloader",
    "DistNodeDataLoader": "runtime.dataloader",
    "Block": "runtime.block",
    "DistEdgeDataLoader": "runtime.edge_dataloader",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    return getattr(import_module(module), name)
