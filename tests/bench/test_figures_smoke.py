"""``python -m bench.figures --smoke``: every benchmark figure runs end to end on a tiny graph
(partition, sampling and pull, training, launch, accuracy parity), so a benchmark that breaks
fails the suite. Its numbers mean nothing at this size; the test asserts that each figure was
measured, with every figure's numbers present and finite, or skipped with its reason (the
launch over SSH, without root or sshd), never failed."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.figures import FIGURES
from testing.timeouts import RUN_TIMEOUT, TIMEOUT

pytestmark = [pytest.mark.multiprocess, pytest.mark.bench]

REPO = Path(__file__).resolve().parents[2]
# The whole run, a dozen jobs of servers and trainers started one after the other, may take
# RUN_TIMEOUT (98 s in one process on the 2-core machine, 127 s beside another test worker).

# Numbers each measured figure must carry (a few per figure; the report reads more).
NUMBERS = {
    "partition": ("whole_s", "metis_alone_s", "ratio", "peak_bytes", "metis_alone_peak_bytes",
                  "edge_cut_pct", "random_cut_pct"),
    "sampling": ("local_seeds_s", "dist_seeds_s", "pull_remote_gbs", "bare_zmq_gbs",
                 "pull_local_gbs", "numpy_local_gbs"),
    "parity": ("single_acc", "dist_acc", "diff_points"),
}
LAUNCH_NUMBERS = ("first_launch_s", "launch_s", "stop_s", "direct_s", "sigterm_s",
                  "launch_ratio", "stop_ratio")


def _run_smoke(out: Path, work: Path) -> tuple[int, str, str]:
    """The smoke run in its own process group; past RUN_TIMEOUT it is interrupted (SIGINT:
    its own clean-up stops the servers it started), then killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.figures", "--smoke", "--out", str(out),
         "--workdir", str(work)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=3 * TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        pytest.fail(f"the smoke run took more than {RUN_TIMEOUT:.0f}s (DGLCTL_TEST_TIMEOUT "
                    f"{TIMEOUT:g}); its log:\n{stderr[-4000:]}")
    return proc.returncode, stdout, stderr


def _assert_numbers(where: str, f: dict, keys: tuple[str, ...]) -> None:
    for k in keys:
        v = f.get(k)
        assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), \
            f"{where}: {k} = {v!r}"


def _assert_skipped(where: str, f: dict) -> None:
    assert f.get("status") == "skipped" and f.get("why"), f"{where}: {f}"


def test_every_figure_runs(tmp_path):
    out = tmp_path / "out"
    code, stdout, stderr = _run_smoke(out, tmp_path / "work")
    log = f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}"
    assert code == 0, log
    results = json.loads((out / "figures.json").read_text())
    assert (out / "figures.md").read_text().startswith("Run: `python -m bench.figures --smoke`")
    assert results["mode"] == "smoke" and results["settings"]["nodes"] <= 10_000
    assert list(results["figures"]) == list(FIGURES)
    for name, f in results["figures"].items():
        assert f.get("status") == "measured", f"{name}: {f}\n{log}"
        assert f"\n== {name}\n" in stdout, f"{name} printed no rows\n{log}"
        _assert_numbers(name, f, NUMBERS.get(name, ()))
    training = results["figures"]["training"]
    hosts = [str(h) for h in results["settings"]["hosts"]]
    assert [k for k in training if k.isdigit()] == hosts
    for h in hosts:
        _assert_numbers(f"training, {h} host(s)", training[h], ("epoch_s", "seeds_s"))
        assert training[h]["split"], f"training, {h} host(s): no split of the epoch time"
    launch = results["figures"]["launch"]
    _assert_numbers("launch over local", launch["local"], LAUNCH_NUMBERS)
    assert launch["local"]["clean"], launch["local"]["left"]
    if launch["ssh"].get("status") is None:
        _assert_numbers("launch over ssh", launch["ssh"], LAUNCH_NUMBERS)
        assert launch["ssh"]["clean"], launch["ssh"]["left"]
    else:
        _assert_skipped("launch over ssh", launch["ssh"])
