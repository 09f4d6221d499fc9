"""``python -m bench.prefetch_bench --smoke --json``: the example's epoch with batches made in
the step, on the prefetch thread and by a sampler process, end to end on a 20k-node graph on 2
machines (two trainers, DDP) and on 1. The three give the same loss: the batches are the same however they are
made. Its timings mean nothing at this size."""

from __future__ import annotations

import pytest

from bench.prefetch_bench import HOSTS, MODES
from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]
RUN_TIMEOUT = 30 * TIMEOUT  # six epochs of 5 steps on 1 and 2 loopback machines: ~60 s idle


def test_smoke_times_the_wait_of_every_mode_with_the_same_losses():
    r, log = run_smoke("bench.prefetch_bench", RUN_TIMEOUT)
    assert r["nodes"] == 20_000 and r["steps"] == 5, log
    assert set(r["setups"]) == {f"{h} hosts" for h in HOSTS}, log
    for modes in r["setups"].values():
        assert set(modes) == set(MODES), log
        for m in modes.values():
            assert m["epoch_s"] > 0 and 0 <= m["wait_s"] <= m["epoch_s"], log
        losses = {name: m["losses"] for name, m in modes.items()}
        assert len({tuple(v) for v in losses.values()}) == 1, losses
