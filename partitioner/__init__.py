"""partitioner: read graphs, partition them (METIS, random, KaMinPar), write and load partitions.

Knows nothing of processes, networks or SSH; ``runtime`` and ``dglctl`` build on it.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("dglctl")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

from .errors import (  # noqa: E402
    ChecksumError,
    OutEdgesMissing,
    OutputExistsError,
    PartitionerError,
    PartitionFormatError,
    PartitionInputError,
    PartitionOptionError,
)
from .graph import Graph  # noqa: E402
from .loader import Partition, load_partition, load_partition_book  # noqa: E402
from .pipeline import partition_graph  # noqa: E402

__all__ = [
    "ChecksumError",
    "Graph",
    "OutEdgesMissing",
    "OutputExistsError",
    "Partition",
    "PartitionFormatError",
    "PartitionInputError",
    "PartitionOptionError",
    "PartitionerError",
    "__version__",
    "load_partition",
    "load_partition_book",
    "partition_graph",
]
