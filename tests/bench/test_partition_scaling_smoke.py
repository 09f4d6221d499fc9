"""``python -m bench.partition_scaling --smoke --json``: the scaling benchmark runs end to end on
a 60k-edge graph (generate, read_graph alone, the whole ``dglctl partition`` sampled by phase),
so a change to the partition's progress lines or to the benchmark that breaks it fails the
suite. Its numbers mean nothing at this size; the test asserts that every phase of the run was
seen, each with positive seconds and a peak, and that the whole run and both baselines carry
their bytes per directed edge."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.partition_scaling import PHASES
from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]
# Three short child processes (generate, read, partition): a second or two on an idle machine;
# 10x that on 2 cores shared with another test run.
RUN_TIMEOUT = 6 * TIMEOUT


def _positive(x: object) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x > 0)


def test_smoke_measures_every_phase():
    results, log = run_smoke("bench.partition_scaling", RUN_TIMEOUT)
    assert results["settings"]["smoke"], log
    # One run per regime, the fast one first: the baseline of the lean one.
    assert [r["regime"] for r in results["sizes"]] == ["fast", "lean"], log
    for size in results["sizes"]:
        _check_size(size)


def _check_size(size):
    assert size["status"] == "measured", size
    assert size["edges"] <= 200_000 and size["nodes"] > 0
    assert list(size["phases"]) == list(PHASES), size["order"]
    for name, f in size["phases"].items():
        assert _positive(f["seconds"]), f"{name}: seconds {f['seconds']!r}"
        assert _positive(f["peak_rss_bytes"]), f"{name}: peak {f['peak_rss_bytes']!r}"
        assert _positive(f["bytes_per_edge"]), f"{name}: bytes/edge {f['bytes_per_edge']!r}"
        assert _positive(f["estimated_bytes"]), f"{name}: estimate {f['estimated_bytes']!r}"
    whole = size["whole"]
    assert _positive(whole["bytes_per_edge"]) and _positive(whole["seconds"]), whole
    assert _positive(whole["estimated_bytes"]) and size["estimate"]["regime"] == size["regime"]
    # The whole run's high-water mark is the highest phase or gap peak (the same readings).
    peaks = [f["peak_rss_bytes"] or 0 for f in (*size["phases"].values(),
                                                 *size["gaps"].values())]
    assert whole["peak_bytes"] == max(peaks), (whole, peaks)
    assert _positive(size["read_only"]["bytes_per_edge"]), size["read_only"]
    assert _positive(size["input"]["bytes_per_edge"]), size["input"]
