"""A detached job is supervised as a foreground one is, by the launcher it leaves in the
background: it records its end and cause, stops its servers once its last trainer has ended,
and restarts failed attempts. Real launches on the local cluster."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from dglctl.jobs.manifest import JobManifest
from testing.cli import run_cli as run
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.multiprocess
TRAINER = str(SCRIPTS / "trainer.py")


def _detach(parts, local_cluster, capsys, mode: str, *options: str) -> dict:
    code, out, err = run(["launch", *options, "--detach", "--json", TRAINER, "--cluster",
                          str(local_cluster), "--part-config", str(parts[2]), "--", mode],
                         capsys)
    assert code == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["state"] in ("running", "succeeded") and Path(doc["log"]).is_file(), doc
    return doc


def _listed(job: str, capsys) -> dict:
    code, out, err = run(["status", "--json"], capsys)
    assert code == 0, err
    (found,) = [j for j in json.loads(out) if j["job"] == job]
    return found


def _ended(job: str, capsys) -> tuple[dict, float]:
    """The job as the list shows it once it has ended, and when it was seen ended."""
    def ended() -> dict | None:
        found = _listed(job, capsys)
        return found if found["state"] in ("succeeded", "failed", "stopped") else None

    found = wait_until(ended, f"job {job} ended", timeout=12 * TIMEOUT, interval=0.2)
    return found, time.monotonic()


def _nothing_left(job: str) -> None:
    """Once its background launcher has ended (its teardown done), nothing of the job is
    left on this machine."""
    pid = int(JobManifest.load(job).launcher["pid"])
    wait_until(lambda: not Path(f"/proc/{pid}").exists(),
               f"job {job}'s background launcher gone", timeout=6 * TIMEOUT, interval=0.1)
    assert leftovers(job) == ([], [])


def test_a_detached_job_that_succeeds_says_so_and_leaves_nothing(parts, home, local_cluster,
                                                                  capsys):
    doc = _detach(parts, local_cluster, capsys, "ok")
    found, _ = _ended(doc["job"], capsys)
    assert found["state"] == "succeeded", found
    code, out, _ = run(["status", doc["job"], "--json"], capsys)
    assert code == 0 and json.loads(out)["state"] == "succeeded"
    _nothing_left(doc["job"])  # the servers went with the last trainer
    assert "every trainer finished" in Path(doc["log"]).read_text()


def test_a_detached_job_restarts_a_failed_attempt(parts, home, local_cluster, capsys):
    doc = _detach(parts, local_cluster, capsys, "fail-once", "--max-restarts", "1")
    found, _ = _ended(doc["job"], capsys)
    assert found["state"] == "succeeded", found
    m = JobManifest.load(doc["job"])
    assert m.attempt == 1 and [a["attempt"] for a in m.attempts] == [0]
    assert "restarting the trainers: attempt 1" in Path(doc["log"]).read_text()
    _nothing_left(doc["job"])


def test_a_detached_job_whose_trainer_is_killed_fails_with_the_cause(parts, home,
                                                                     local_cluster, capsys):
    doc = _detach(parts, local_cluster, capsys, "sleep")
    m = JobManifest.load(doc["job"])
    trainer = next(p for p in m.procs if p.name == "trainer-1-0")
    wait_until(lambda: b"sleeping" in Path(trainer.log).read_bytes(), "trainer-1-0 sleeping",
               timeout=6 * TIMEOUT, interval=0.2)
    os.kill(int(Path(trainer.log).with_suffix(".pid").read_text()), signal.SIGKILL)
    killed = time.monotonic()
    found, seen = _ended(doc["job"], capsys)
    assert found["state"] == "failed", found
    assert "trainer-1-0" in found["result"]["cause"], found["result"]
    assert "killed by signal 9 (SIGKILL)" in found["result"]["cause"], found["result"]
    # Ended and recorded within seconds (a supervisor's checks, the teardown), not a lease.
    assert seen - killed < 6 * TIMEOUT
    _nothing_left(doc["job"])
