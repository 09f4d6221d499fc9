"""Spare hosts (``spares:`` in the cluster YAML, issue 22): when a host of a job is lost (its
agent no longer answers, over its old connection or a new one), a spare takes its place: the
lost host's part is copied there, every host gets the new ip_config.txt, the spare's servers
start, and every trainer starts again. Without a spare, a lost host ends the job with that
cause. Hosts are network namespaces with their own sshd; a host is lost by killing everything
in its namespace and taking its link down (``netns.power_off``), as a machine that loses power."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dglctl.config import cluster_from_record, parse_cluster_config
from dglctl.errors import ConfigError
from dglctl.jobs.manifest import list_jobs
from testing.cli import run_cli as run
from testing.netns import make_netns, netns_unavailable, power_off, ssh_hosts
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

TRAINER = str(SCRIPTS / "trainer.py")


@pytest.mark.unit
def test_spares_are_hosts_of_their_own_list():
    c = parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1", "127.0.0.2"],
                              "spares": ["127.0.0.3", {"address": "127.0.0.4", "name": "s1",
                                                       "workspace": "/srv/ws"}]}, "c.yaml")
    assert [h.name for h in c.hosts] == ["127.0.0.1", "127.0.0.2"]
    assert [h.name for h in c.spares] == ["127.0.0.3", "s1"]
    assert c.spares[1].workspace == "/srv/ws"
    # A job's manifest keeps them: status and stop find a spare that took a host's place.
    assert cluster_from_record(json.loads(json.dumps(c.record()))).spares == c.spares
    for spares, words in ((["127.0.0.1"], "spares[0] repeats host '127.0.0.1' (also hosts[0])"),
                          ("127.0.0.3", "'spares' must be a list of hosts"),
                          ([{"address": "127.0.0.3", "python": "-c"}], "spares[0].python"),
                          (["10.0.0.3"], "loopback")):
        with pytest.raises(ConfigError) as e:
            parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1"],
                                  "spares": spares}, "c.yaml")
        assert words in e.value.message, e.value.message


@pytest.fixture
def cluster_hosts(tmp_path):
    """Three namespaced hosts (node0, node1, node2) with an sshd each; the Netns and the ssh
    config naming them."""
    why = netns_unavailable()
    if why:
        pytest.skip(f"no network namespaces here: {why}")
    net = make_netns(3)
    servers: list = []
    try:
        servers, cfg = ssh_hosts(net, tmp_path / "sshd")
        yield net, cfg
    finally:
        for s in servers:
            s.stop()
        net.remove()


def _cluster(tmp_path: Path, cfg: Path, hosts: list[str], spares: list[str]) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(cfg), "connect_timeout": 5},
        "hosts": [{"address": a, "workspace": str(tmp_path / f"ws-{a}")} for a in hosts],
        "spares": [{"address": a, "workspace": str(tmp_path / f"ws-{a}")} for a in spares],
        "python": sys.executable, "servers_per_host": 1, "trainers_per_host": 1,
        "samplers_per_trainer": 1, "timeout": TIMEOUT, "max_restarts": 1}))
    return path


def _launch_and_lose_node1(net, cluster: Path, parts, tmp_path: Path
                           ) -> tuple[int, str, str]:
    """Launch the sleeping trainers on node0 and node1 (a supervised launch, in a child
    process), power node1 off once both sleep, and return the launch's exit code and output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dglctl", "launch", TRAINER, "--cluster", str(cluster),
         "--part-config", str(parts[2]), "--", "sleep-once"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def sleeping() -> bool:
            logs = list(tmp_path.glob("ws-node[01]/jobs/*/trainer-*.log"))
            if len(logs) == 2 and all(b"sleeping" in p.read_bytes() for p in logs):
                return True
            assert proc.poll() is None, proc.communicate()
            return False

        wait_until(sleeping, "2 trainers sleeping", timeout=12 * TIMEOUT, interval=0.2)
        power_off(net, 1)
        out, err = proc.communicate(timeout=30 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@pytest.mark.ssh
def test_a_lost_host_is_replaced_by_a_spare(cluster_hosts, parts, home, tmp_path, capsys):
    """node1 loses power while the trainers sleep: node2 gets part 1 and node1's servers, the
    trainers of attempt 1 pull every node's features from node0's and node2's servers (the
    same sums as attempt 0's), the job succeeds, and nothing of it is left running."""
    net, cfg = cluster_hosts
    cluster = _cluster(tmp_path, cfg, ["node0", "node1"], ["node2"])
    code, out, err = _launch_and_lose_node1(net, cluster, parts, tmp_path)
    assert code == 0, err
    assert "host node1 is lost: spare node2 takes its place (part 1)" in err, err
    assert "restarting the trainers: attempt 1" in err
    # (node1's lines may not have been read before it went: they are lost with it.)
    sums = dict(re.findall(r"\[(node\d trainer \d)\] rank \d feature sum (\S+)",
                           out[out.index("in attempt 1"):]))
    before = re.search(r"\[node0 trainer 0\] rank 0 feature sum (\S+)", out)
    assert before and sums == {"node0 trainer 0": before[1], "node2 trainer 1": before[1]}, out
    assert out.count("] done") == 2, out  # attempt 1's trainers finished

    job = list_jobs()[-1]
    assert job.state == "succeeded" and job.attempt == 1
    assert [h.name for h in job.hosts] == ["node0", "node2"]
    assert [h.data_address for h in job.hosts] == [net.addresses[0], net.addresses[2]]
    (lost,) = job.lost_hosts
    assert (lost["index"], lost["host"]["name"], lost["spare"], lost["attempt"]) == \
        (1, "node1", "node2", 1)
    (failed,) = job.attempts
    assert failed["cause"].startswith("host node1 lost (its agent did not answer")
    assert failed["how"] == "host lost"
    assert sorted(p.name for p in job.procs if p.lost) == ["server-1-0", "trainer-1-0"]
    assert {p.name for p in job.live_procs()} == {
        "server-0-0", "server-1-0-attempt1", "trainer-0-0-attempt1", "trainer-1-0-attempt1"}
    # Every host's ip_config names the spare in the lost host's place.
    for ws in ("ws-node0", "ws-node2"):
        ip_config = (tmp_path / ws / "jobs" / job.job_id / "ip_config.txt").read_text()
        assert [line.split()[0] for line in ip_config.splitlines()] == \
            [net.addresses[0], net.addresses[2]], (ws, ip_config)
    assert (tmp_path / "ws-node2" / "data" / "g" / "part1").is_dir()

    code, out, _ = run(["status", job.job_id], capsys)
    assert code == 0
    assert "host node1 was lost in attempt 0: spare node2 took its place (part 1)" in out
    assert re.search(r"attempt 0: failed after \S+: host node1 lost \(its agent", out), out
    code, out, err = run(["logs", job.job_id, "--attempt", "0"], capsys)
    assert code == 0
    assert "the logs of 2 process(es) are lost with their host (node1)" in err
    assert "[node0 trainer 0] sleeping" in out
    assert leftovers(job.job_id) == ([], [])


@pytest.mark.ssh
def test_a_lost_host_without_a_spare_ends_the_job(cluster_hosts, parts, home, tmp_path,
                                                  capsys):
    """The same loss with no spare: the job fails at once, saying which host was lost and
    that no spare is left, and stops what runs on the other host."""
    net, cfg = cluster_hosts
    cluster = _cluster(tmp_path, cfg, ["node0", "node1"], [])
    code, _, err = _launch_and_lose_node1(net, cluster, parts, tmp_path)
    assert code == 1, err
    assert "host node1 lost (its agent did not answer" in err, err
    assert "no spare host is left to take its place" in err, err
    assert "spares:" in err  # the hint says how to have one
    job = list_jobs()[-1]
    assert job.state == "failed" and job.attempt == 0
    assert job.attempts[0]["how"] == "host lost"
    assert leftovers(job.job_id) == ([], [])
