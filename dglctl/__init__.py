"""dglctl: partition graphs, launch distributed GNN training jobs, supervise them."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("dglctl")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
