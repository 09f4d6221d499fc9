"""Stalls are not deaths: servers and trainers paused (SIGSTOP) and resumed, real processes.

A machine that pauses (a VM pause, a swap storm, a network outage) for less than the job's
timeout must cost nothing but the pause; a longer silence is an error that names the peer and
how long it was silent; a SIGKILLed server is reported as silent, never as alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from runtime.errors import PeerTimeout
from runtime.rpc.client import Request, ServerPool
from runtime.rpc.ip_config import read_ip_config
from runtime.rpc.messages import Barrier, Pull
from testing.servers import REPO, running_cluster
from testing.timeouts import PEER_TIMEOUT, TIMEOUT

pytestmark = pytest.mark.multiprocess

ROWS = np.array([0, 1, 2])  # local ids of machine 1's rows


@pytest.fixture
def slow_cluster(two_part_graph, tmp_path):
    """Servers of a job whose peer timeout is TIMEOUT (the stalls below are fractions of it)."""
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path, timeout=TIMEOUT) as c:
        yield c


def _pool(cluster, role="trainer") -> ServerPool:
    pool = ServerPool(read_ip_config(cluster.ip_config), cluster.num_servers, cluster.token,
                      cluster.timeout, role=role)
    pool.connect()
    return pool


def test_server_paused_shorter_than_the_timeout_is_survived(slow_cluster):
    """Machine 1's servers stopped for half the timeout (longer than ZeroMQ's old 3 s
    heartbeat): a pull sent during the pause is answered after it, and so is every later one,
    without re-authenticating by hand."""
    pool = _pool(slow_cluster)
    try:
        before = pool.call(1, 0, Pull("_N/feat", ids=ROWS)).rows
        slow_cluster.pause_machine(1)
        resume = threading.Timer(0.5 * TIMEOUT, slow_cluster.pause_machine, (1, True))
        resume.start()
        try:
            during = pool.call(1, 0, Pull("_N/feat", ids=ROWS)).rows
        finally:
            resume.join()
        np.testing.assert_array_equal(during, before)
        for k in range(slow_cluster.num_servers):
            np.testing.assert_array_equal(pool.call(1, k, Pull("_N/feat", ids=ROWS)).rows,
                                          before)
    finally:
        pool.close()
    assert all(p.poll() is None for p in slow_cluster.procs), "a server left during the pause"


def test_longer_silence_names_the_server_and_how_long(two_part_graph, tmp_path):
    """Stopped for longer than the timeout: a PeerTimeout naming the server and its silence."""
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path, timeout=PEER_TIMEOUT) as c:
        pool = _pool(c)
        try:
            c.pause_machine(1)
            t0 = time.monotonic()
            with pytest.raises(PeerTimeout, match=r"server 0 of machine 1 .* has been silent "
                                                  r"for [0-9.]+s"):
                pool.call(1, 0, Pull("_N/feat", ids=ROWS))
            assert time.monotonic() - t0 < PEER_TIMEOUT + TIMEOUT / 2
        finally:
            c.pause_machine(1, resume=True)
            pool.close()


def test_killed_server_is_silent_not_alive(two_part_graph, tmp_path):
    """A barrier whose server was SIGKILLed: reported as a silent server, not as a live one
    withholding its reply (even when the barrier's own limit is shorter than the timeout)."""
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path, timeout=PEER_TIMEOUT) as c:
        pool = _pool(c, role="client")
        try:
            c.kill_machine(1)
            with pytest.raises(PeerTimeout) as err:
                pool.call_many([Request(1, 0, Barrier("b", 2))], max_wait=PEER_TIMEOUT / 4)
            assert "silent" in err.value.message and "answers pings" not in err.value.message
        finally:
            pool.close()


TRAINERS = textwrap.dedent("""
    import sys, time
    from runtime.rpc.client import ServerPool
    from runtime.rpc.ip_config import read_ip_config
    from runtime.rpc.messages import Pull
    import numpy as np
    ip_config, token, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    # The job's two trainers (one per machine) in one process: the servers arm their idle
    # shutdown once both have said hello.
    pools = [ServerPool(read_ip_config(ip_config), 2, token, timeout, role="trainer")
             for _ in range(2)]
    for p in pools:
        p.connect()
    print("ready", flush=True)
    sys.stdin.readline()  # the test pauses this process, resumes it, then writes a line
    for p in pools:
        for m in range(2):
            p.call(m, 0, Pull("_N/feat", ids=np.array([0])))
    print("pulled after the pause", flush=True)
""")


def test_paused_trainer_does_not_end_the_job(cluster):
    """The job's trainers stopped for 2.5 job timeouts (past ZeroMQ's drop of their
    connections at two timeouts): the servers wait out their grace (three timeouts with
    nobody connected), keep running, and the resumed trainers' requests are answered (same
    identities: no new handshake)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAINERS, str(cluster.ip_config), cluster.token,
         str(cluster.timeout)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(2.5 * cluster.timeout)  # the pause itself is what the test is about
        assert all(p.poll() is None for p in cluster.procs), "a server left"
        os.killpg(proc.pid, signal.SIGCONT)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=3 * TIMEOUT)
        assert proc.returncode == 0 and "pulled after the pause" in out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(TIMEOUT)
