"""The jobs a benchmark starts, from the test harness (``testing``): graph servers started
directly (no launcher), the environment and cluster files of its ``dglctl`` commands, free
ports, and what of a job is left after it.

Runtime benchmarks (runtime_bench, epoch_bench) use :func:`start_servers`; the launch-side
ones (launch_bench, accuracy_bench, figures, dist_vs_dgl) the cluster files and
:func:`cli_env`. Each is the tests' own implementation, with a benchmark's defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.common import REPO
from runtime.env import DEFAULT_TIMEOUT
from testing.clusters import local_cluster, ssh_cluster
from testing.ports import free_port_range as free_base
from testing.procs import leftover_report
from testing.servers import Cluster
from testing.servers import start_servers as _start_servers

__all__ = ["cli_env", "free_base", "leftover_report", "local_cluster_file", "run_trainers",
           "ssh_cluster_file", "start_servers"]

SERVER_TIMEOUT = 60.0  # the servers' peer timeout: a benchmark's big loads take their time


def start_servers(part_config: Path, num_servers: int, workdir: Path,
                  ips: list[str] | None = None) -> Cluster:
    """Server processes of one job, one machine per loopback address (what 'dglctl launch'
    does): 127.0.0.1 and 127.0.0.2 unless ``ips`` says otherwise. ``stop()`` ends them."""
    return _start_servers(part_config, workdir, ips=ips, num_servers=num_servers,
                          timeout=SERVER_TIMEOUT)


def run_trainers(part_config: Path, work: Path, argv: list[str], *, hosts: int = 2,
                 num_samplers: int = 0, omp_threads: int = 1, timeout: float = 900.0,
                 what: str = "trainer", env: dict[str, str] | None = None) -> list[str]:
    """One server per loopback machine and one trainer each running ``argv`` (from the
    repository root, torch.distributed's variables set, ``omp_threads`` threads, ``env``
    on top), as 'dglctl launch' would start them; every process is ended, even on failure.
    Returns each trainer's output; a trainer that exits non-zero is a RuntimeError with the
    end of its errors."""
    env_extra = env or {}
    servers = start_servers(part_config, 1, work, ips=[f"127.0.0.{i + 1}" for i in range(hosts)])
    master = free_base(["127.0.0.1"], 1)
    trainers: list[subprocess.Popen] = []
    try:
        for rank in range(hosts):
            env = servers.env("trainer", rank)
            env.update(RANK=str(rank), WORLD_SIZE=str(hosts), LOCAL_RANK="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master),
                       DGLCTL_NUM_SAMPLERS=str(num_samplers), OMP_NUM_THREADS=str(omp_threads))
            env.update(env_extra)
            trainers.append(subprocess.Popen([sys.executable, *argv], cwd=REPO, env=env,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True))
        outs = [p.communicate(timeout=timeout) for p in trainers]
    finally:
        for p in trainers:
            if p.poll() is None:
                p.kill()
                p.wait()
        servers.stop()
    for rank, (p, (_, err)) in enumerate(zip(trainers, outs, strict=True)):
        if p.returncode != 0:
            raise RuntimeError(f"{what} {rank} of {hosts} exited {p.returncode}: "
                               f"{err.strip()[-2000:]}")
    return [out for out, _ in outs]


def cli_env(work: Path) -> dict[str, str]:
    """The environment of a benchmark's dglctl commands: job manifests under ``work``."""
    return {**os.environ, "DGLCTL_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}


def local_cluster_file(path: Path, *, hosts: int = 2, trainers: int = 1, samplers: int = 0,
                       workspace: Path | None = None) -> Path:
    """A local-transport cluster file like configs/local.yaml (the launcher's default job
    timeout, written out: benchmarks read and raise it), with its own workspace and a free
    port base, so a benchmark job never meets the user's."""
    return local_cluster(path, workspace or path.parent / (path.stem + "-ws"), num_hosts=hosts,
                         servers_per_host=1, trainers_per_host=trainers,
                         samplers_per_trainer=samplers, timeout=DEFAULT_TIMEOUT)


def ssh_cluster_file(path: Path, sshd, *, hosts: int = 2) -> Path:
    """The same cluster over the test sshd (testing/sshd.py) on 127.0.0.1...: the launcher's
    job and connect timeouts, one OpenMP thread per process."""
    return ssh_cluster(path, sshd, num_hosts=hosts, timeout=None, ssh_connect_timeout=None,
                       env={"OMP_NUM_THREADS": "1"})
