"""Two launches that choose their ports at the same moment never choose the same ones: each
reserves its block on every host (agent/ports.py), the loser chooses again. Real agents
(``python -m dglctl.agent``) and real launches on the local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.clusters import local_cluster
from testing.ports import free_port_range
from testing.procs import leftovers
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess
REPO = Path(__file__).parents[2]


def _agent(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dglctl.agent", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _answer(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=3 * TIMEOUT)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def tmpdir_env(tmp_path):
    """The agents' environment with a private TMPDIR: their reservations folder is the
    test's own, so no other test's launch is seen."""
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def test_of_two_reservations_at_once_exactly_one_gets_the_ports(tmp_path, tmpdir_env):
    ports = ",".join(str(p) for p in range(41000, 41005))
    for round_ in range(10):
        jobs = [f"job-{round_}-{i}" for i in range(2)]
        procs = [_agent("reserve", "--workspace", str(tmp_path / "ws"), "--job", j, "--ports",
                        ports, "--lease-seconds", "60", env=tmpdir_env) for j in jobs]
        answers = [_answer(p) for p in procs]
        winners = [j for j, a in zip(jobs, answers, strict=True) if not a["taken"]]
        assert len(winners) == 1, answers
        loser = next(a for a in answers if a["taken"])
        assert set(loser["taken"].values()) == set(winners)  # it names who holds them
        # The loser holds nothing (all or none), and preflight counts them busy.
        report = _answer(_agent("preflight", "--workspace", str(tmp_path / "ws"), "--ports",
                                ports, env=tmpdir_env))
        assert sorted(report["ports_busy"]) == list(range(41000, 41005))
        assert _answer(_agent("release", "--job", winners[0], env=tmpdir_env))["released"] \
            == list(range(41000, 41005))
        report = _answer(_agent("preflight", "--workspace", str(tmp_path / "ws"), "--ports",
                                ports, env=tmpdir_env))
        assert report["ports_busy"] == []


def test_a_reservation_whose_lease_lapsed_is_taken_over(tmp_path, tmpdir_env):
    ws = str(tmp_path / "ws")
    assert _answer(_agent("reserve", "--workspace", ws, "--job", "old", "--ports", "41010",
                          "--lease-seconds", "60", env=tmpdir_env))["taken"] == {}
    taken = _answer(_agent("reserve", "--workspace", ws, "--job", "new", "--ports", "41010",
                           "--lease-seconds", "60", env=tmpdir_env))["taken"]
    assert taken == {"41010": "old"}
    # The old job's launcher stopped renewing: its lease is older than its length.
    lease = Path(ws) / "jobs" / "old" / "lease"
    os.utime(lease, (time.time() - 120, time.time() - 120))
    assert _answer(_agent("reserve", "--workspace", ws, "--job", "new", "--ports", "41010",
                          "--lease-seconds", "60", env=tmpdir_env))["taken"] == {}


# The launches before port reservations collided in the first round (checked against that
# code), so three rounds keep the check; each round is two real launches.
ROUNDS = 3


def _cluster(tmp_path: Path, name: str, port_base: int) -> Path:
    # One trainer per host, no samplers: the race is at the servers' ports, and the fewer
    # processes start, the more rounds the test affords.
    return local_cluster(tmp_path / f"{name}.yaml", tmp_path / f"ws-{name}",
                         port_base=port_base, trainers_per_host=1, samplers_per_trainer=0)


def test_two_launches_started_together_both_run_on_different_ports(parts, tmp_path):
    """ROUNDS times: two launches on the same hosts with the same configured port base, started
    within 100 ms of each other. Both succeed; their servers use different ports."""
    # A trainer that only ends: the race is over once the servers listen.
    script = tmp_path / "project" / "noop.py"
    script.parent.mkdir()
    script.write_text("print('trainer done', flush=True)\n")
    for round_ in range(ROUNDS):
        home = tmp_path / f"home-{round_}"
        env = {**os.environ, "DGLCTL_HOME": str(home)}
        base = free_port_range(["127.0.0.1", "127.0.0.2"], 40)
        # Each its own workspace: what is under test is the ports, not a shared copy.
        clusters = [_cluster(tmp_path, f"r{round_}-{i}", base) for i in range(2)]
        procs = []
        try:
            for c in clusters:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "dglctl", "launch", "--cluster", str(c),
                     "--part-config", str(parts[2]), str(script)],
                    cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True))
            outs = [p.communicate(timeout=12 * TIMEOUT)[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(3 * TIMEOUT)
        for p, out in zip(procs, outs, strict=True):
            assert p.returncode == 0, f"round {round_}:\n{out[-3000:]}"
        # Each job's ip_config.txt: its servers' addresses and port bases.
        configs = {f.name.split(".")[0]: f.read_text().split()
                   for f in (home / "jobs").glob("*.ip_config.txt")}
        assert len(configs) == 2, configs
        (a, b) = configs.values()
        assert a != b, f"round {round_}: both jobs ran servers on {a}"
        for job in configs:
            assert leftovers(job) == ([], [])
