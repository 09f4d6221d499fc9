"""partitioner: read graphs, partition them (METIS, random, KaMinPar), write and load partitions.

Knows nothing of processes, networks or SSH; ``runtime`` and ``dglctl`` build on it.
"""

from importlib import import_module
from typing import Any

from .version import __version__

# Names are loaded on first use: ``import partitioner`` (and so every runtime process, which
# reads the partition format) does not load the partition writer and its dependencies.
_EXPORTS = {
    "ChecksumError": "partitioner.errors",
    "OutEdgesMissing": "partitioner.errors",
    "OutputExistsError": "partitioner.errors",
    "PartitionerError": "partitioner.errors",
    "PartitionFormatError": "partitioner.errors",
    "PartitionInputError": "partitioner.errors",
    "PartitionOptionError": "partitioner.errors",
    "PartitionMemoryError": "partitioner.errors",
    "Graph": "partitioner.graph",
    "as_graph": "partitioner.inputs",
    "Partition": "partitioner.loader",
    "load_partition": "partitioner.loader",
    "load_partition_book": "partitioner.loader",
    "load_partition_feats": "partitioner.feats",
    "partition_graph": "partitioner.pipeline",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'partitioner' has no attribute {name!r}")
    return getattr(import_module(module), name)
