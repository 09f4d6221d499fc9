"""``python -m bench.epoch_floor --smoke --json``: the floor benchmark of issue 23 runs end to
end on a 20k-node graph (the floor trainers' epoch, then each phase and its floor on the kept
batches), so a change to the runtime's API that breaks it fails the suite. Its numbers mean
nothing at this size."""

from __future__ import annotations

import pytest

from bench.epoch_floor import PHASES
from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]
RUN_TIMEOUT = 30 * TIMEOUT  # a partition of 20k nodes, two servers, two trainers: ~20 s idle


def test_smoke_measures_every_phase_and_its_floor():
    r, log = run_smoke("bench.epoch_floor", RUN_TIMEOUT)
    assert r["nodes"] == 20_000 and r["steps"] == 5, log
    for phase in PHASES:
        assert r["ours"][phase] > 0 and r["floor"][phase] > 0, (phase, log)
        assert r["ratio"][phase] == pytest.approx(r["ours"][phase] / r["floor"][phase]), log
    assert r["remote_bytes"] > 0, log  # the fetch floor moved what the batches pulled
