"""``python -m bench.gpu_epoch --smoke --json``: issue 24's GPU-vs-CPU epoch runs end to end
(here the CPU epochs only: no CUDA device; where torch sees one, the GPU epoch and the ratio
too), so a change that breaks the example's --device path on the CPU side fails the suite.
Its numbers mean nothing at this size."""

from __future__ import annotations

import pytest
import torch

from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]
RUN_TIMEOUT = 30 * TIMEOUT


def test_smoke_runs_the_cpu_epoch_and_the_gpu_one_where_there_is_a_gpu():
    r, log = run_smoke("bench.gpu_epoch", RUN_TIMEOUT)
    assert r["nodes"] == 20_000 and r["steps"] == 5, log
    assert r["cpu"]["epoch_s"] > 0 and set(r["cpu"]["split"]) >= {"fetch", "forward"}, log
    # The cached kind runs (5 steps: still watching its warm-up pulls, so no hits yet). Its
    # fetch time is printed to 10 ms: at this size either side can read 0.00s, and the ratio
    # is None when the uncached one does (CI saw that once).
    assert r["cpu_cache"]["epoch_s"] > 0, log
    base, cached = r["cpu"]["split"]["fetch"], r["cpu_cache"]["split"]["fetch"]
    assert r["cpu_cache_fetch_ratio"] == (cached / base if base else None), log
    assert r["cuda"] == torch.cuda.is_available()
    if r["cuda"]:
        assert r["gpu"]["epoch_s"] > 0 and r["gpu_over_cpu"] > 0, log
    else:
        assert "gpu" not in r and "no CUDA device here" in log, log
