"""Fixtures that start real graph servers on 127.0.0.x and clean up after them."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from partitioner import partition_graph
from runtime.env import RuntimeEnv
from runtime.rpc.ip_config import write_ip_config
from runtime.store.shm import job_files
from tests.conftest import PEER_TIMEOUT, TIMEOUT, community_graph

REPO = Path(__file__).resolve().parents[2]


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections."""
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999  # Linux's default
    return lo, hi


def free_port_range(ips: list[str], count: int) -> int:
    """A base port such that base..base+count-1 are free on every ip (best effort).

    Drawn below the kernel's ephemeral range: a port from that range (what binding port 0
    gives) can become the local port of any outgoing connection between this check and the
    servers' bind, seconds later on a busy machine. Seen once under load: a server could not
    listen, and its client's connection to that port met itself and failed the handshake.
    """
    low, high = worker_port_slice(10000, _ephemeral_ports()[0])
    high -= count
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high) if high > low else _any_port(ips[0])
        if base + count >= 65535:
            continue
        socks = []
        try:
            for ip in ips:
                for k in range(count):
                    t = socket.socket()
                    socks.append(t)
                    t.bind((ip, base + k))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free port range found")


def worker_port_slice(low: int, high: int) -> tuple[int, int]:
    """This xdist worker's share of the ports ``low..high`` (all of them without xdist): the
    workers' servers never draw the same port, even between one's check and its bind."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    step = (high - low) // max(count, 1)
    return low + index * step, low + (index + 1) * step


def _any_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def terminate_groups(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM each process's group (each leads its own), SIGKILL what is left after
    ``grace`` seconds, and reap them all."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(TIMEOUT)


@dataclass
class Cluster:
    """A job of real server processes, one 'machine' per loopback address."""

    part_config: Path
    ip_config: Path
    ips: list[str]
    num_servers: int
    job_id: str = field(default_factory=lambda: "t" + uuid.uuid4().hex[:10])
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    procs: list[subprocess.Popen] = field(default_factory=list)
    timeout: float = PEER_TIMEOUT
    encrypt: bool = False

    def env(self, role: str, machine_id: int, num_trainers: int = 1, **extra) -> dict[str, str]:
        e = RuntimeEnv(role=role, job_id=self.job_id, token=self.token, machine_id=machine_id,
                       ip_config=str(self.ip_config), part_config=str(self.part_config),
                       num_servers=self.num_servers, num_trainers=num_trainers,
                       timeout=self.timeout, encrypt=self.encrypt, **extra)
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

    def stop(self) -> None:
        for p in self.procs:  # a stopped server would never see the SIGTERM
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)
        terminate_groups(self.procs, grace=TIMEOUT)


@pytest.fixture(scope="module")
def two_part_graph(tmp_path_factory):
    g = community_graph(n=600)
    out = tmp_path_factory.mktemp("rt") / "parts"
    partition_graph(g, "g", 2, out, method="metis")
    return g, out / "g.json"


@contextlib.contextmanager
def running_cluster(cfg: Path, tmp_path: Path, num_servers: int = 2,
                    timeout: float = PEER_TIMEOUT, encrypt: bool = False) -> Iterator[Cluster]:
    """Servers of a 2-part partition on 127.0.0.1 and 127.0.0.2 (the job's peer ``timeout``),
    all answering when it yields; stopped and checked after."""
    ips = ["127.0.0.1", "127.0.0.2"]
    base = free_port_range(ips, num_servers)
    ip_config = tmp_path / "ip_config.txt"
    write_ip_config(ip_config, [(ip, base) for ip in ips])
    c = Cluster(cfg, ip_config, ips, num_servers, timeout=timeout, encrypt=encrypt)
    c.start_servers()
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


@pytest.fixture
def cluster(two_part_graph, tmp_path):
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path) as c:
        yield c


@pytest.fixture
def trainer(monkeypatch, cluster):
    """This test process as the one trainer of machine 0 (runtime.dist_graph, initialized)."""
    import runtime.dist_graph as dg
    from runtime.context import exit_client, initialize

    for k, v in cluster.env("trainer", 0).items():
        monkeypatch.setenv(k, v)
    initialize()
    yield dg
    exit_client()


@pytest.fixture
def standalone(two_part_graph, tmp_path_factory):
    """The same graph partitioned into one part, for standalone mode."""
    import runtime as dg

    g, _ = two_part_graph
    out = tmp_path_factory.mktemp("one") / "parts"
    partition_graph(g, "g", 1, out)
    dg.exit_client()
    dg.initialize()  # no env contract: standalone
    yield out / "g.json"
    dg.exit_client()


@pytest.fixture
def pulls_by_thread(monkeypatch) -> list[tuple[str, str]]:
    """Every ``TensorStore.pull_parts`` (which every pull goes through) from now on, as
    ``(tensor key, thread name)`` (the pulls a loader's prefetch thread makes are named
    "dglctl-prefetch")."""
    import threading

    from runtime.tensor_store import TensorStore

    pulls: list[tuple[str, str]] = []
    real_pull = TensorStore.pull_parts

    def spy(self, key, *args, **kwargs):
        pulls.append((key, threading.current_thread().name))
        return real_pull(self, key, *args, **kwargs)

    monkeypatch.setattr(TensorStore, "pull_parts", spy)
    return pulls
