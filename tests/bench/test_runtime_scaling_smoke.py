"""``python -m bench.runtime_scaling --smoke --json``: the runtime scaling benchmark runs end to
end on a 200k-edge graph (generate, partition, servers started directly and measured, the
client's sampling and pulls, the GraphSAGE example launched with ``dglctl launch``), so a
change to the runtime, the launcher's output or the example that breaks it fails the suite.
Its numbers mean nothing at this size; the test asserts that every figure was measured
(positive and finite) and that nothing of its jobs is left (processes, shared memory)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testing.timeouts import TIMEOUT

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]
# Generate and partition (a second), two servers, a client process that imports torch, then a
# whole dglctl launch (preflight, copy, servers, two trainers, 2 x 2 steps): about 25 s on an
# idle 2-core machine; 10x that when the cores are shared with another test run.
RUN_TIMEOUT = 25 * TIMEOUT
# On a timeout the benchmark gets SIGTERM and stops what it started (servers, the client,
# the launcher's job) in its finally blocks; this long.
STOP_GRACE = 9 * TIMEOUT


def _positive(x: object) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x > 0)


def _run_smoke() -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, "-m", "bench.runtime_scaling", "--smoke", "--json"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # its finally blocks stop its processes
        try:
            out, err = proc.communicate(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"the smoke run took more than {RUN_TIMEOUT:.0f}s (DGLCTL_TEST_TIMEOUT "
                    f"{TIMEOUT:g}); its log:\n{err[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_smoke_measures_every_figure():
    proc = _run_smoke()
    log = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, log
    results = json.loads(proc.stdout)  # --json: the JSON alone on stdout
    assert results["settings"]["smoke"], log
    (size,) = results["sizes"]
    assert size["status"] == "measured", size.get("why")
    assert size["edges"] <= 200_000 and size["nodes"] > 0 and size["parts"] == 2
    assert _positive(size["partition"]["seconds"]), size["partition"]  # a fresh cache: made
    machines = size["servers"]["machines"]
    assert len(machines) == 2
    for m, mm in enumerate(machines):
        for key in ("startup_s", "loaded_s", "shm_bytes", "rss_bytes", "rss_anon_bytes",
                    "peak_rss_bytes"):
            assert _positive(mm[key]), f"machine {m}: {key} {mm[key]!r}"
        assert mm["loaded_s"] <= mm["startup_s"], mm  # a server listens only once loaded
        # Every partition array is in shared memory: features, the CSC, the out-CSR.
        assert {"_N/feat", "graph:_N:_E:_N:indices"} <= set(mm["shm_by_tensor"]), mm
        assert _positive(mm["after_client"]["rss_bytes"]), mm
    client = size["servers"]["client"]
    for key in ("dist_seeds_s", "dist_edges_s", "pull_remote_gbs", "bare_zmq_gbs",
                "pull_local_gbs", "numpy_local_gbs"):
        assert _positive(client[key]), f"{key} {client[key]!r}"
    assert client["seeds"] == 1000
    training = size["training"]
    for key in ("s_per_step", "warmup_s_per_step", "epoch_estimate_s", "launch_s"):
        assert _positive(training[key]), f"{key} {training[key]!r}"
    assert training["extrapolated"] and training["steps_per_epoch"] >= training["steps"] >= 1
    assert {"copy", "servers"} <= set(training["launcher_steps"]), training["launcher_steps"]
    # Nothing of the benchmark's jobs is left: it checks each job itself (processes of its
    # groups or carrying its id, shared memory) and fails the size otherwise; the shared
    # memory of both jobs is checked here once more.
    jobs = [size["servers"]["job"], *training["jobs"]]
    assert len(jobs) == 2, jobs
    assert not [p for p in Path("/dev/shm").glob("dglctl.*")
                if any(p.name.startswith(f"dglctl.{j}.") for j in jobs)]
