"""Real graph servers of a 2-part partition on 127.0.0.1 and 127.0.0.2, started for a test
or a benchmark, and stopped and checked after."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runtime.env import RuntimeEnv
from runtime.rpc.ip_config import write_ip_config
from runtime.rpc.liveness import Liveness
from runtime.store.shm import job_files
from testing.ports import free_port_range
from testing.procs import end_with_this_process, terminate_groups
from testing.timeouts import PEER_TIMEOUT, TIMEOUT

REPO = Path(__file__).resolve().parents[1]


def new_job_id() -> str:
    """A job id of its own for a test's or a benchmark's servers."""
    return "t" + uuid.uuid4().hex[:10]


@dataclass
class Cluster:
    """A job of real server processes, one 'machine' per loopback address."""

    part_config: Path
    ip_config: Path
    ips: list[str]
    num_servers: int
    job_id: str = field(default_factory=new_job_id)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    procs: list[subprocess.Popen] = field(default_factory=list)
    timeout: float = PEER_TIMEOUT
    encrypt: bool = False
    idle_grace: float = 0.0  # DGLCTL_IDLE_GRACE (0: three timeouts)

    def env(self, role: str, machine_id: int, num_trainers: int = 1, **extra) -> dict[str, str]:
        e = RuntimeEnv(role=role, job_id=self.job_id, token=self.token, machine_id=machine_id,
                       ip_config=str(self.ip_config), part_config=str(self.part_config),
                       num_servers=self.num_servers, num_trainers=num_trainers,
                       timeout=self.timeout, encrypt=self.encrypt,
                       idle_grace=self.idle_grace, **extra)
        env = dict(os.environ)
        env.update(e.to_environ())
        env["PYTHONPATH"] = str(REPO)
        return env

    def start_servers(self) -> None:
        for m in range(len(self.ips)):
            for k in range(self.num_servers):
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "runtime.server"],
                    env=self.env("server", m, server_id=k), cwd=REPO, start_new_session=True,
                    preexec_fn=end_with_this_process,
                ))

    def wait_ready(self, timeout: float = 3 * TIMEOUT) -> None:
        """Wait until every server answers the handshake (as the launcher's readiness probe)."""
        from runtime.errors import DistError
        from runtime.rpc.client import ServerPool
        from runtime.rpc.ip_config import read_ip_config

        pool = ServerPool(read_ip_config(self.ip_config), self.num_servers, self.token,
                          self.timeout, client_name="probe", keeps_server=False,
                          encrypt=self.encrypt)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    pool.connect()
                    return
                except DistError:
                    if time.monotonic() > deadline or any(p.poll() is not None
                                                          for p in self.procs):
                        raise
        finally:
            pool.close()

    def kill_machine(self, machine_id: int) -> None:
        for p in self.procs[machine_id * self.num_servers:(machine_id + 1) * self.num_servers]:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(TIMEOUT / 2)

    def pause_machine(self, machine_id: int, resume: bool = False) -> None:
        """SIGSTOP (or, with ``resume``, SIGCONT) every server of ``machine_id``."""
        for p in self.procs[machine_id * self.num_servers:(machine_id + 1) * self.num_servers]:
            os.killpg(p.pid, signal.SIGCONT if resume else signal.SIGSTOP)

    def leave_within(self) -> float:
        """How long the servers may take to leave on their own once their clients have: the
        idle grace, plus the usual allowance for a busy machine."""
        return Liveness(self.timeout, self.idle_grace).idle_grace + TIMEOUT

    def stop(self) -> None:
        for p in self.procs:  # a stopped server would never see the SIGTERM
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)
        terminate_groups(self.procs, grace=TIMEOUT)


def start_servers(part_config: Path, workdir: Path, *, ips: list[str] | None = None,
                  num_servers: int = 1, timeout: float = PEER_TIMEOUT, encrypt: bool = False,
                  idle_grace: float = 0.0) -> Cluster:
    """``num_servers`` server processes per machine of ``part_config``, one machine per
    loopback address of ``ips`` (127.0.0.1 and 127.0.0.2 by default), as 'dglctl launch'
    starts them (the env contract, no launcher); their ip_config is written to ``workdir``.
    Started, not yet answering: :meth:`Cluster.wait_ready` waits for them."""
    ips = list(ips or ["127.0.0.1", "127.0.0.2"])
    base = free_port_range(ips, num_servers)
    job_id = new_job_id()
    ip_config = workdir / f"ip_config-{job_id}.txt"  # one per job: jobs may share a folder
    write_ip_config(ip_config, [(ip, base) for ip in ips])
    c = Cluster(part_config, ip_config, ips, num_servers, job_id=job_id, timeout=timeout,
                encrypt=encrypt, idle_grace=idle_grace)
    c.start_servers()
    return c


@contextlib.contextmanager
def running_cluster(cfg: Path, tmp_path: Path, num_servers: int = 2,
                    timeout: float = PEER_TIMEOUT, encrypt: bool = False,
                    idle_grace: float = 0.0) -> Iterator[Cluster]:
    """Servers of a 2-part partition on 127.0.0.1 and 127.0.0.2 (the job's peer ``timeout``,
    their ``idle_grace``), all answering when it yields; stopped and checked after."""
    c = start_servers(cfg, tmp_path, num_servers=num_servers, timeout=timeout,
                      encrypt=encrypt, idle_grace=idle_grace)
    ips = c.ips
    from runtime.store.shm import ShmArena

    try:
        # Every server answers before the test starts, so that a test's own (short) peer
        # timeout never includes the servers' start-up (seconds on a busy 2-core machine).
        c.wait_ready()
        yield c
    finally:
        c.stop()
        # A SIGKILLed main server cannot clean up: that is the launcher's job (dglctl
        # stop). Here, even when the test failed.
        for m in range(len(ips)):
            ShmArena(c.job_id, m).cleanup()
    for p in c.procs:
        assert p.poll() is not None, "a server process survived the test"
    assert job_files(c.job_id) == []
