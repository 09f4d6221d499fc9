"""The jobs a benchmark starts: graph servers started directly (no launcher), the environment
and cluster files of its ``dglctl`` commands, free ports, and what of a job is left after it.

Runtime benchmarks (runtime_bench, epoch_bench) use :class:`Servers`; the launch-side ones
(launch_bench, accuracy_bench, figures, dist_vs_dgl) the cluster files and :func:`cli_env`.
Ports and process-group ends come from the runtime tests' helpers, one implementation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from bench.common import REPO
from testing.ports import free_port_range as free_base
from testing.procs import terminate_groups

__all__ = ["Servers", "cli_env", "free_base", "leftovers", "local_cluster_file", "run_trainers",
           "ssh_cluster_file"]


class Servers:
    """Server processes of one job, one machine per loopback address (what 'dglctl launch'
    does): 127.0.0.1 and 127.0.0.2 unless ``ips`` says otherwise."""

    def __init__(self, part_config: Path, num_servers: int, workdir: Path,
                 ips: list[str] | None = None) -> None:
        from runtime.env import RuntimeEnv
        from runtime.rpc.ip_config import write_ip_config

        self.ips = list(ips or ["127.0.0.1", "127.0.0.2"])
        self.ip_config = workdir / f"ip_{len(self.ips)}x{num_servers}.txt"
        write_ip_config(self.ip_config, [(ip, free_base(self.ips, num_servers)) for ip in self.ips])
        self.job = "b" + uuid.uuid4().hex[:8]
        self.token = uuid.uuid4().hex
        self.num_servers = num_servers

        def env(role, m, k=0):
            e = dict(os.environ)
            e.update(RuntimeEnv(role, self.job, self.token, m, str(self.ip_config),
                                str(part_config), num_servers=num_servers, server_id=k,
                                timeout=60).to_environ())
            e["PYTHONPATH"] = str(REPO)
            return e

        self.env = env
        self.procs = [subprocess.Popen([sys.executable, "-m", "runtime.server"], env=env("server", m, k),
                                       start_new_session=True)
                      for m in range(len(self.ips)) for k in range(num_servers)]

    def stop(self) -> None:
        terminate_groups(self.procs, grace=30)


def run_trainers(part_config: Path, work: Path, argv: list[str], *, hosts: int = 2,
                 num_samplers: int = 0, omp_threads: int = 1, timeout: float = 900.0,
                 what: str = "trainer", env: dict[str, str] | None = None) -> list[str]:
    """One server per loopback machine and one trainer each running ``argv`` (from the
    repository root, torch.distributed's variables set, ``omp_threads`` threads, ``env``
    on top), as 'dglctl launch' would start them; every process is ended, even on failure.
    Returns each trainer's output; a trainer that exits non-zero is a RuntimeError with the
    end of its errors."""
    env_extra = env or {}
    servers = Servers(part_config, 1, work, ips=[f"127.0.0.{i + 1}" for i in range(hosts)])
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
    """A local-transport cluster file like configs/local.yaml, with its own workspace and a
    free port base, so a benchmark job never meets the user's."""
    cfg = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    ips = [f"127.0.0.{i + 1}" for i in range(hosts)]
    cfg.update(hosts=[{"name": f"m{i}", "address": a} for i, a in enumerate(ips)],
               workspace=str(workspace or path.parent / (path.stem + "-ws")),
               servers_per_host=1, trainers_per_host=trainers, samplers_per_trainer=samplers,
               port_base=free_base(ips, 1))
    path.write_text(yaml.safe_dump(cfg))
    return path


def ssh_cluster_file(path: Path, sshd, *, hosts: int = 2) -> Path:
    """The same cluster over the test sshd (testing/sshd.py) on 127.0.0.1..."""
    from testing.sshd import ADDRESSES

    path.write_text(yaml.safe_dump({
        "transport": "ssh",
        "ssh": {"user": "root", "port": sshd.port, "key": str(sshd.client_key),
                "known_hosts": str(sshd.known_hosts)},
        "hosts": [{"name": f"h{i}", "address": a, "workspace": str(path.parent / f"ws{i}")}
                  for i, a in enumerate(ADDRESSES[:hosts])],
        "python": sys.executable, "trainers_per_host": 1, "servers_per_host": 1,
        "samplers_per_trainer": 0, "port_base": free_base(list(ADDRESSES[:hosts]), 1),
        "env": {"OMP_NUM_THREADS": "1"}}))
    return path


def leftovers(job_id: str, pgids: list[int]) -> list[str]:
    """What of job ``job_id`` still exists: running processes of the groups ``pgids``, processes
    whose environment carries the job id (found by reading /proc; nothing is signalled), and
    the job's shared memory files."""
    from runtime.store.shm import job_files

    left = []
    # A process that has exited but is not reaped yet (a zombie: init reaps a detached job's
    # process-group leaders, which took about 2 s on these VMs) no longer runs; any other
    # member of the job's groups does.
    groups = set(pgids)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in groups and fields[0] not in (b"Z", b"X"):
            left.append(f"pid {d.name} (process group {int(fields[2])})")
    mark = f"DGLCTL_JOB_ID={job_id}\0".encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if mark in (d / "environ").read_bytes():
                    left.append(f"pid {d.name}")
            except OSError:
                continue
    left += [str(f) for f in job_files(job_id)]
    return left
