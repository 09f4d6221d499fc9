"""``dglctl launch --max-restarts N``: a failed attempt's trainers start again (the servers
and their shared memory stay), each attempt's cause is recorded and shown by ``status`` and
``logs --attempt K``, and a failure at the same point on every attempt stops early (issue 22).
Real processes on the local cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dglctl.jobs.manifest import list_jobs
from testing.cli import run_cli as run
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.multiprocess
TRAINER = str(SCRIPTS / "trainer.py")


def _launch(parts, local_cluster, capsys, mode, *options):
    return run(["launch", *options, TRAINER, "--cluster", str(local_cluster), "--part-config",
                str(parts[2]), "--", mode], capsys)


def test_a_failed_attempt_restarts_the_trainers_and_keeps_the_servers(parts, home,
                                                                      full_local_cluster, capsys):
    code, out, err = _launch(parts, full_local_cluster, capsys, "fail-once", "--max-restarts", "2")
    assert code == 0, err
    assert "attempt 0 failed: job" in err and "restarting the trainers: attempt 1" in err
    for rank in range(4):
        assert f"rank {rank}/4 pulled (400, 5) in attempt 1" in out
    # (Trainers of attempt 0 other than rank 1 may have finished before it failed.)
    assert out[out.index("in attempt 1"):].count("] done") == 4
    job = list_jobs()[-1]
    assert job.state == "succeeded" and job.attempt == 1
    (failed,) = job.attempts
    assert failed["attempt"] == 0 and failed["process"] == "trainer-0-1"
    assert "exited with code 3" in failed["how"] and failed["point"] is None
    # Each server was started once and served both attempts; every trainer twice.
    servers = [p for p in job.procs if p.role == "server"]
    assert sorted(p.name for p in servers) == ["server-0-0", "server-1-0"]
    trainers = sorted(p.name for p in job.procs if p.role == "trainer" and p.attempt == 1)
    assert trainers == ["trainer-0-0-attempt1", "trainer-0-1-attempt1", "trainer-1-0-attempt1",
                        "trainer-1-1-attempt1"]
    assert leftovers(job.job_id) == ([], [])

    code, out, _ = run(["status", job.job_id], capsys)
    assert code == 0
    assert "attempts: 2 (1 restart(s) of at most 2" in out
    assert re.search(r"attempt 0: failed after \S+: job \S+ failed: \[m0 trainer 1\]", out), out
    code, out, _ = run(["status", job.job_id, "--json"], capsys)
    data = json.loads(out)
    assert data["attempt"] == 1 and data["max_restarts"] == 2
    assert [a["attempt"] for a in data["attempts"]] == [0]
    assert {r["attempt"] for r in data["processes"] if r["role"] == "trainer"} == {1}
    code, out, _ = run(["logs", job.job_id, "--attempt", "0", "--role", "trainer"], capsys)
    assert "giving up in the first attempt" in out and "in attempt 1" not in out
    code, out, _ = run(["logs", job.job_id, "--role", "trainer"], capsys)
    assert "in attempt 1" in out and "giving up" not in out
    code, _, err = run(["logs", job.job_id, "--attempt", "5"], capsys)
    assert code != 0 and "no attempt 5" in err


def test_max_restarts_from_the_cluster_yaml_and_exhausted(parts, home, local_cluster, capsys):
    data = yaml.safe_load(local_cluster.read_text())
    local_cluster.write_text(yaml.safe_dump({**data, "max_restarts": 1}))
    code, out, err = _launch(parts, local_cluster, capsys, "fail")
    assert code == 1
    assert "after 1 restart: every attempt failed" in err
    job = list_jobs()[-1]
    assert job.state == "failed" and [a["attempt"] for a in job.attempts] == [0, 1]
    assert job.result["root_cause"] == "trainer-1-0-attempt1"
    assert leftovers(job.job_id) == ([], [])


def test_a_failure_at_the_same_point_stops_early(parts, home, local_cluster, capsys):
    code, out, err = _launch(parts, local_cluster, capsys, "raise-at-batch",
                             "--max-restarts", "5")
    assert code == 1
    assert "failed 3 times at the same point" in err, err
    assert "ValueError at " in err and "epoch 0 batch 2" in err
    # The first attempt's failure, with its traceback.
    first = err[err.index("The first of them, attempt 0"):]
    assert "deliberate bug on batch 2 (attempt 0)" in first and "Traceback" in first
    job = list_jobs()[-1]
    assert [a["attempt"] for a in job.attempts] == [0, 1, 2]
    assert leftovers(job.job_id) == ([], [])


def _pid_when_all_sleep(name: str, trainers: int) -> int | None:
    """The pid of process ``name`` of the newest job once its ``trainers`` sleep."""
    jobs = list_jobs()
    if not jobs:
        return None
    logs = [Path(p.log) for p in jobs[-1].procs if p.role == "trainer"]
    if len(logs) < trainers or not all(b"sleeping" in log.read_bytes() for log in logs):
        return None
    rec = next(p for p in jobs[-1].procs if p.name == name)
    return int(Path(rec.log).with_suffix(".pid").read_text())


def test_a_killed_server_starts_again_on_its_host(parts, home, local_cluster):
    """server-1-0 SIGKILLed mid-run: m1's servers load their shards again, the trainers run a
    second attempt against them (the same features), the job succeeds, nothing is left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dglctl", "launch", "--max-restarts", "1", TRAINER, "--cluster",
         str(local_cluster), "--part-config", str(parts[2]), "--", "sleep-once"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        victim = wait_until(lambda: _pid_when_all_sleep("server-1-0", 2), "sleeping trainers",
                            12 * TIMEOUT, 0.3)
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=30 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=6 * TIMEOUT)
    assert proc.returncode == 0, err
    assert "the servers of m1 start again from the shards there" in err
    job = list_jobs()[-1]
    (failed,) = job.attempts
    assert failed["process"] == "server-1-0" and "SIGKILL" in failed["how"]
    live = {p.name for p in job.live_procs()}
    assert {"server-0-0", "server-1-0-attempt1", "trainer-1-0-attempt1"} <= live
    sums = dict(re.findall(r"(\[m\d trainer \d\]) rank \d feature sum (\S+)", out))
    assert len(sums) == 2
    again = re.findall(r"(\[m\d trainer \d\]) rank \d feature sum (\S+)", out)[2:]
    assert [sums[k] == v for k, v in again] == [True] * 2, out
    assert leftovers(job.job_id) == ([], [])


def _short_barriers(local_cluster) -> None:
    """A barrier that waits longer than a few timeouts is a hang: fail it (the trainer's
    error says so) instead of after the default 10 minutes."""
    data = yaml.safe_load(local_cluster.read_text())
    data.setdefault("env", {})["DGLCTL_BARRIER_TIMEOUT"] = str(4 * TIMEOUT)
    local_cluster.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("mode", ["barrier-restart", "sparse-restart", "tensor-restart"])
def test_what_a_failed_attempt_left_on_the_servers_is_dropped(parts, home, local_cluster,
                                                               capsys, mode):
    """Rank 1 fails in the first attempt while its peers' arrivals at a barrier, their
    shares of a sparse optimizer step, or a named tensor it created are on the servers: the
    next attempt starts clean (its barriers and steps count only its own trainers, a named
    tensor starts anew, a persistent one stays), and the job succeeds."""
    _short_barriers(local_cluster)
    code, out, err = _launch(parts, local_cluster, capsys, mode, "--max-restarts", "1")
    assert code == 0, out[-3000:] + err[-3000:]
    assert "restarting the trainers: attempt 1" in err, err[-3000:]
    after = out[out.index("in attempt 1"):]
    if mode == "barrier-restart":
        assert all(f"rank {r} passed 12 barriers in attempt 1" in out for r in range(2)), out
    elif mode == "sparse-restart":
        sums = set(re.findall(r"embedding sum (\S+) in attempt 1", out))
        assert len(re.findall(r"embedding sum \S+ in attempt 1", out)) == 2, out
        # Every trainer sees the same rows: five steps from zeros, all of this attempt's.
        assert len(sums) == 1, sums
        # Adagrad's k-th step moves an element by -lr / sqrt(k) whatever its gradient: five
        # steps from zeros, this attempt's alone, sum to this over the 400 x 4 elements.
        expected = -0.1 * sum(1 / k ** 0.5 for k in range(1, 6)) * 4 * 400
        assert abs(float(sums.pop()) - expected) < 1e-2 * abs(expected), (sums, expected)
    else:
        for r in range(2):
            assert f"rank {r} scratch sum 0.0 kept sum 5600.0 in attempt 1" in out, out
    assert after.count("] done") == 2
    job = list_jobs()[-1]
    assert job.state == "succeeded" and job.attempt == 1
    assert leftovers(job.job_id) == ([], [])
