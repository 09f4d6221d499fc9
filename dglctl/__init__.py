"""dglctl: partition graphs, launch distributed GNN training jobs, supervise them."""

from partitioner.version import __version__

__all__ = ["__version__"]
