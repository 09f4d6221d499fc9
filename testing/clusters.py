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
TEST_TIMEOUT = 5  # the job's timeout in a test's cluster: a lost peer is seen in seconds


def _apply(data: dict[str, Any], changes: dict[str, Any]) -> None:
    """``changes`` replace keys of ``data`` (``ssh_KEY`` ones keys of its ``ssh`` section); a
    None removes the key, so the launcher's default applies."""
    for k, v in changes.items():
        section, key = (data["ssh"], k[4:]) if k.startswith("ssh_") else (data, k)
        if v is None:
            section.pop(key, None)
        else:
            section[key] = v


def local_cluster(path: Path, workspace: Path, *, num_hosts: int = 2,
                  **changes: Any) -> Path:
    """``configs/local.yaml`` written to ``path`` with ``workspace``, ``num_hosts`` hosts
    (m0, m1, ... on 127.0.0.1, 127.0.0.2, ...), a free port base and a 5 s job timeout;
    ``changes`` replace keys of the YAML (a None removes one)."""
    data = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    ips = [f"127.0.0.{i + 1}" for i in range(num_hosts)]
    data["hosts"] = [{"name": f"m{i}", "address": a} for i, a in enumerate(ips)]
    data["workspace"] = str(workspace)
    data["port_base"] = free_port_range(ips, 4)
    data["timeout"] = TEST_TIMEOUT
    _apply(data, changes)
    path.write_text(yaml.safe_dump(data))
    return path


def ssh_cluster(path: Path, sshd: TestSSHD, *, num_hosts: int = len(ADDRESSES),
                **changes: Any) -> Path:
    """A cluster of the first ``num_hosts`` loopback hosts of ``sshd`` (h0, h1, ..., a
    workspace each beside ``path``), one server and one trainer per host, no samplers, a 5 s
    job timeout, written to ``path``. ``changes`` replace keys of the YAML, ``ssh_KEY`` ones
    keys of its ``ssh`` section (a None removes one)."""
    addresses = list(ADDRESSES[:num_hosts])
    data: dict[str, Any] = {
        "transport": "ssh",
        "ssh": {"user": "root", "port": sshd.port, "key": str(sshd.client_key),
                "known_hosts": str(sshd.known_hosts), "connect_timeout": 3},
        "hosts": [{"name": f"h{i}", "address": a, "workspace": str(path.parent / f"ws-h{i}")}
                  for i, a in enumerate(addresses)],
        "python": sys.executable,
        "servers_per_host": 1, "trainers_per_host": 1, "samplers_per_trainer": 0,
        "port_base": free_port_range(addresses, 4), "timeout": TEST_TIMEOUT,
    }
    _apply(data, changes)
    path.write_text(yaml.safe_dump(data))
    return path
