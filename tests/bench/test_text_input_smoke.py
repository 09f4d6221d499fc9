"""``python -m bench.text_input_bench --smoke --json``: the text-input benchmark runs end to end
on a 30k-edge graph (write the text and the npz, the import-only child, three reads), so a
change to the partition's progress lines or to the benchmark that breaks it fails the suite.
Its numbers mean nothing at this size (and a graph this small is parsed into memory in every
regime: tests/partitioner/test_streamed_input.py tests the streaming itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]
# Four short child processes: a few seconds on an idle machine; 10x that on 2 busy cores.
RUN_TIMEOUT = 6 * TIMEOUT


def test_smoke_measures_the_three_reads():
    results, log = run_smoke("bench.text_input_bench", RUN_TIMEOUT)
    (size,) = results["sizes"]
    assert size["status"] == "measured" and size["edges"] == 30_000, log
    assert size["interpreter_peak_bytes"] > 0 and size["text_bytes"] > 0
    reads = size["reads"]
    assert list(reads) == ["text, in memory (fast)", "text, streamed (lean)",
                           "npz, mapped (floor)"]
    for name, r in reads.items():
        assert r["seconds"] > 0 and r["peak_bytes"] >= size["interpreter_peak_bytes"] / 2, name
        assert r["read_seconds"] is not None, f"{name}: no 'read done in' line\n{log}"
        assert not r["streamed"], name  # 30k edges parse into a few hundred KB
    assert reads["text, in memory (fast)"]["peak_ratio_to_fast"] == 1.0
