"""``python -m bench.restart_bench --smoke --json``: the restart benchmark runs end to end on a
20k-node graph (a checkpoint saved and loaded; the example's epoch with and without
checkpoints; a launch whose trainer is SIGKILLed and restarted, and a fresh one), so a change
to the examples' output or to the launcher that breaks it fails the suite. Its numbers mean
nothing at this size."""

from __future__ import annotations

import pytest

from testing.timeouts import RUN_TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]
# Five training runs and three launches, within RUN_TIMEOUT: 50 s on the 2-core machine.


def test_smoke_measures_every_figure():
    results, log = run_smoke("bench.restart_bench", RUN_TIMEOUT)
    ckpt = results["checkpoint"]
    assert ckpt["nodes"] == 20_000 and ckpt["bytes"] > 20_000 * 64 * 4, log
    assert all(v > 0 for v in ckpt["median"].values()), log
    epoch = results["epoch"]
    assert len(epoch["times"]["none"]) == len(epoch["times"]["every100"]) == 1, log
    failure = results["failure"]
    assert 0 < failure["kill_to_resume_s"] < RUN_TIMEOUT and failure["fresh_launch_s"] > 0, log
    assert failure["redone_s"] >= 0, log
