"""``python -m bench.distributed_partition --smoke --json``: the benchmark runs end to end on a
20k-node graph (one machine with METIS, 2 and 4 ranks with ParMETIS, 2 ranks random), so a
change to the distributed partitioner's report or to the benchmark that breaks it fails the
suite. Its numbers mean nothing at this size."""

from __future__ import annotations

import pytest

from testing.timeouts import TIMEOUT
from tests.bench.smoke import run_smoke

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]

# Four partitions of a small graph, each a few seconds of mpiexec and imports; 10x on 2 busy
# cores.
RUN_TIMEOUT = 12 * TIMEOUT


def test_smoke_runs_every_kind_and_the_model():
    results, log = run_smoke("bench.distributed_partition", RUN_TIMEOUT)
    runs = results["runs"]
    assert [r["ranks"] for r in runs.values()] == [1, 2, 4, 2], log
    for name, r in runs.items():
        assert r["seconds"] > 0 and r["peak_bytes"] > 0 and r["edge_cut"] > 0, name
    single = runs["single machine, METIS"]
    assert single["time_ratio"] == single["peak_ratio"] == single["cut_ratio"] == 1.0
    parmetis = [r for name, r in runs.items() if "ParMETIS" in name]
    assert all(len(r["rank_peaks"]) == r["ranks"] for r in parmetis)
    assert all(r["cut_ratio"] < 0.5 * runs["2 ranks, random (no partitioner)"]["cut_ratio"]
               for r in parmetis)
    model = results["model"]
    assert set(model["graphs"]) == {"ogbn-papers100M", "MAG240M"} and model["assumptions"]
    for rows in model["graphs"].values():
        assert rows["32"]["rank_memory_gb"] < rows["8"]["rank_memory_gb"]
