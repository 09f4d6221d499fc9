"""The project's one version number (from the installed distribution's metadata: pyproject.toml).

``partitioner``, ``runtime`` and ``dglctl`` all report this one; the agent's preflight and the
servers' handshake compare it across hosts.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("dglctl")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
