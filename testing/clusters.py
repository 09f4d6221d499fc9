"""Cluster YAMLs for tests and benchmarks: the local default cluster, and loopback SSH."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from testing.ports import free_port_range
from testing.servers import REPO
from testing.sshd import ADDRESSES, TestSSHD

LOCAL_ADDRESSES = ["127.0.0.1", "127.0.0.2"]


def local_cluster(path: Path, workspace: Path, **changes: Any) -> Path:
    """``configs/local.yaml`` written to ``path`` with ``workspace``, a free port base and a
    5 s job timeout; ``changes`` replace keys of the YAML."""
    data = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    data["workspace"] = str(workspace)
    data["port_base"] = free_port_range(LOCAL_ADDRESSES, 4)
    data["timeout"] = 5
    data.update(changes)
    path.write_text(yaml.safe_dump(data))
    return path


def ssh_cluster(path: Path, sshd: TestSSHD, **changes: Any) -> Path:
    """A cluster of the three loopback hosts of ``sshd`` (h0..h2, a workspace each beside
    ``path``), one server and one trainer per host, no samplers, written to ``path``.
    ``changes`` replace keys of the YAML; ``ssh_KEY`` ones keys of its ``ssh`` section."""
    data: dict[str, Any] = {
        "transport": "ssh",
        "ssh": {"user": "root", "port": sshd.port, "key": str(sshd.client_key),
                "known_hosts": str(sshd.known_hosts), "connect_timeout": 3},
        "hosts": [{"name": f"h{i}", "address": a, "workspace": str(path.parent / f"ws-h{i}")}
                  for i, a in enumerate(ADDRESSES)],
        "python": sys.executable,
        "servers_per_host": 1, "trainers_per_host": 1, "samplers_per_trainer": 0,
        "port_base": free_port_range(list(ADDRESSES), 4), "timeout": 5,
    }
    for k, v in changes.items():
        if k.startswith("ssh_"):
            data["ssh"][k[4:]] = v
        else:
            data[k] = v
    path.write_text(yaml.safe_dump(data))
    return path
