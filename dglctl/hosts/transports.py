"""The transport a cluster asks for (``transport:`` in its YAML): local, SSH or Slurm."""

from __future__ import annotations

from ..config import ClusterConfig, Host
from .slurm_transport import SlurmTransport
from .transport import LocalTransport, SSHTransport, Transport

KINDS: dict[str, type[Transport]] = {"local": LocalTransport, "ssh": SSHTransport,
                                     "slurm": SlurmTransport}


def make_transport(host: Host, cluster: ClusterConfig) -> Transport:
    """The transport the cluster config asks for, to ``host``."""
    return KINDS[cluster.transport](host, cluster)
