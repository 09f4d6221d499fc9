"""``python -m bench.slurm_launch --smoke --json``: issue 26's launch-to-first-step figure,
srun against SSH on the same two hosts, runs end to end (a real sshd and a real Slurm). Its
numbers mean nothing at this size."""

from __future__ import annotations

import pytest

from testing.timeouts import RUN_TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench, pytest.mark.xdist_group("slurm")]


def test_smoke_launches_through_srun_and_through_ssh():
    r, log = run_smoke("bench.slurm_launch", RUN_TIMEOUT)
    for kind in ("ssh", "slurm"):
        assert r[kind]["first_step_s"] > 0 and len(r[kind]["runs"]) == 1, log
        assert {"preflight", "copy", "servers", "trainers"} <= set(r[kind]["steps"]), log
    assert r["slurm_over_ssh"] == r["slurm"]["first_step_s"] / r["ssh"]["first_step_s"], log
