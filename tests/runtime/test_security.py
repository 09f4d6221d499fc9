"""Nobody gets in who does not belong: a job's servers admit only holders of its token.

Real server processes; the stranger is a plain ZeroMQ socket, as any program on the network
could open one.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

from runtime.errors import HandshakeError
from runtime.rpc.client import ServerPool
from runtime.rpc.ip_config import read_ip_config
from runtime.rpc.messages import Pull
from testing.servers import running_cluster
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_stranger_cannot_make_a_server_allocate(cluster):
    """256 MiB from a peer without the token: the server never reads it (its memory stays
    where it was) and keeps serving the job."""
    main = cluster.procs[0]
    before = _rss_mib(main.pid)
    ctx = zmq.Context.instance()
    stranger = ctx.socket(zmq.DEALER)
    stranger.setsockopt(zmq.LINGER, 0)
    # A DEALER's send blocks while it has no connection: if the server refuses the
    # handshake before the send is queued, it would wait forever (it once hung CI here).
    stranger.setsockopt(zmq.SNDTIMEO, int(1000 * TIMEOUT))
    stranger.connect(read_ip_config(cluster.ip_config)[0].server_addr(0))
    try:
        try:
            stranger.send(np.zeros(256 << 20, np.uint8), copy=False)
        except zmq.Again:
            pass  # refused before a byte went: the server read nothing of it either
        time.sleep(0.2 * TIMEOUT)
        assert stranger.poll(0) == 0, "a stranger got a reply"
        grown = _rss_mib(main.pid) - before
        assert grown < 32, f"the server's memory grew by {grown:.0f} MiB"
    finally:
        stranger.close(0)
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, cluster.token, cluster.timeout)
    try:
        pool.connect()
        assert pool.call(0, 0, Pull("_N/feat", ids=np.array([0]))).rows.shape == (1, 5)
    finally:
        pool.close()


def test_encrypted_job(two_part_graph, tmp_path):
    """encrypt: the job works end to end; a client without the token, or without
    encryption, is refused with an error that says so (never a hang)."""
    _, cfg = two_part_graph
    with running_cluster(cfg, tmp_path, encrypt=True) as c:
        machines = read_ip_config(c.ip_config)
        pool = ServerPool(machines, 2, c.token, c.timeout, encrypt=True)
        try:
            pool.connect()
            rows = pool.call(1, 1, Pull("_N/feat", ids=np.array([0, 1]))).rows
            assert rows.shape == (2, 5)
        finally:
            pool.close()
        for token, encrypt in (("not-the-token", True), (c.token, False)):
            bad = ServerPool(machines, 2, token, c.timeout, encrypt=encrypt)
            try:
                t0 = time.monotonic()
                with pytest.raises(HandshakeError, match="refused the connection"):
                    bad.connect()
                assert time.monotonic() - t0 < c.timeout + TIMEOUT / 2
            finally:
                bad.close()
