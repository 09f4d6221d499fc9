"""The restart oracle: the GraphSAGE example launched with ``dglctl launch`` on the local
two-machine cluster for 4 epochs (1 trainer per host without sampler processes, and the
default cluster: 2 trainers per host with a sampler process each), once uninterrupted and once with trainer 1 SIGKILLed during
epoch 2 under ``--max-restarts 1``, ends with the same model, bit for bit, and the same test
accuracy.

Bit for bit, not within a tolerance: on the CPU with fixed seeds every step is the same
computation in the same order. The resumed attempt starts from the checkpoint's model,
optimizer and random generators (dropout), its loaders yield the same batches with the same
sampling draws (keyed by seed, epoch and batch index), and gloo sums the trainers' gradients
in the same order (the example keeps DDP's gradient buckets from the first step on)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from partitioner import partition_graph
from partitioner.generate import generate_graph
from testing.ports import free_port_range
from testing.procs import leftovers
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess
REPO = Path(__file__).parents[2]
RUN_TIMEOUT = 30 * TIMEOUT


@pytest.fixture(scope="module")
def part_config(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle") / "p2"
    partition_graph(generate_graph(3000, avg_degree=10, seed=1), "g", 2, out)
    return out / "g.json"


# The clusters' shapes: configs/local.yaml as it is (the default), and 1 trainer per host.
SHAPES = {"1 trainer per host": {"trainers_per_host": 1, "samplers_per_trainer": 0},
          "default": {}}


def _cluster(tmp_path: Path, shape: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    data = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    data.update(workspace=str(tmp_path / "ws"),
                port_base=free_port_range(["127.0.0.1", "127.0.0.2"], 4), **SHAPES[shape])
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _argv(tmp_path: Path, part_config: Path, checkpoints: Path, shape: str,
          *options: str) -> list[str]:
    return [sys.executable, "-m", "dglctl", "launch", *options, "--cluster",
            str(_cluster(tmp_path, shape)), "--part-config", str(part_config),
            str(REPO / "examples" / "train_dist.py"), "--graph-name", "g", "--num-epochs", "4",
            "--batch-size", "50", "--fan-out", "5,10", "--lr", "0.01",
            "--checkpoint-dir", str(checkpoints), "--checkpoint-every", "5"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DGLCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}


def _result(out: str) -> tuple[str, str]:
    checksum = re.findall(r"\] model checksum ([0-9a-f]{64})$", out, re.M)
    accuracy = re.findall(r"\] test accuracy ([0-9.]+)$", out, re.M)
    assert len(checksum) == 1 and len(accuracy) == 1, out
    return checksum[0], accuracy[0]


def _pid(home: Path, name: str) -> int:
    (record,) = (home / "jobs").glob("*.json")
    procs = json.loads(record.read_text())["procs"]
    rec = next(p for p in procs if p["name"] == name)
    return int(Path(rec["log"]).with_suffix(".pid").read_text())


@pytest.fixture(scope="module")
def uninterrupted(part_config, tmp_path_factory) -> Callable[[str], tuple[str, str]]:
    """The model checksum and test accuracy of the run without a failure, by cluster shape
    (each run once)."""
    found: dict[str, tuple[str, str]] = {}

    def of(shape: str) -> tuple[str, str]:
        if shape not in found:
            a = tmp_path_factory.mktemp("whole")
            whole = subprocess.run(_argv(a, part_config, a / "ckpt", shape), env=_env(a),
                                   capture_output=True, text=True, timeout=RUN_TIMEOUT)
            assert whole.returncode == 0, whole.stderr
            found[shape] = _result(whole.stdout)
        return found[shape]

    return of


def _run_with_restart(b: Path, part_config: Path, checkpoints: Path, shape: str,
                      on_line: Callable[[str], None] = lambda line: None) -> tuple[int, str, str]:
    """The example under ``--max-restarts 1``, ``on_line`` called with each line of its
    output as it comes: its exit code, output and errors."""
    proc = subprocess.Popen(_argv(b, part_config, checkpoints, shape, "--max-restarts", "1"),
                            env=_env(b), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watchdog = threading.Timer(RUN_TIMEOUT, proc.kill)
    watchdog.start()
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            on_line(line)
        proc.wait(TIMEOUT)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT)
        reader.join(TIMEOUT)
    return proc.returncode, "".join(lines), "".join(err)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_trainer_killed_in_epoch_2_ends_with_the_uninterrupted_model(part_config, tmp_path,
                                                                       uninterrupted, shape):
    b = tmp_path / "b"
    killed = []

    def kill_in_epoch_2(line: str) -> None:
        if not killed and "] epoch 1:" in line:  # rank 0 finished epoch 1: in epoch 2
            # (The line reaches the launcher a moment later: the kill may come a little
            # later in the run, never before epoch 2.)
            os.kill(_pid(b / "home", "trainer-1-0"), signal.SIGKILL)
            killed.append(True)

    code, out, errors = _run_with_restart(b, part_config, tmp_path / "ckpt-b", shape,
                                          kill_in_epoch_2)
    assert killed, out
    assert code == 0, errors
    assert "attempt 0 failed" in errors and "killed by signal 9 (SIGKILL)" in errors, errors
    assert re.search(r"\] resumed from checkpoint step \d+ \(epoch [123], batch \d+\)", out), out
    assert _result(out) == uninterrupted(shape)
    (job,) = (b / "home" / "jobs").glob("*.json")
    assert leftovers(job.stem) == ([], [])


def test_a_trainer_killed_while_a_checkpoint_is_written(part_config, tmp_path, uninterrupted):
    """Trainer 1 SIGKILLed in the middle of a save (the checkpoint's folder is still the
    ``.tmp`` one: trainer 0, which commits it, is held with SIGSTOP while the kill lands):
    attempt 1 resumes from the checkpoint before it, ignoring (and later removing) the
    half-written one, and ends with the uninterrupted model, bit for bit."""
    b, checkpoints = tmp_path / "b", tmp_path / "ckpt-b"
    killed: list[int] = []
    done = threading.Event()

    def kill_mid_save() -> None:
        while not done.is_set() and not killed:
            for entry in (os.listdir(checkpoints) if checkpoints.is_dir() else []):
                m = re.fullmatch(r"\.step-(\d+)\.tmp", entry)
                if m is None or int(m[1]) < 10:  # a save with an earlier one to resume from
                    continue
                try:
                    holder = _pid(b / "home", "trainer-0-0")
                    victim = _pid(b / "home", "trainer-1-0")
                except (StopIteration, FileNotFoundError, ValueError):
                    continue  # not started yet
                os.kill(holder, signal.SIGSTOP)
                try:
                    if (checkpoints / entry).is_dir():  # not committed: the save is under way
                        os.kill(victim, signal.SIGKILL)
                        killed.append(int(m[1]))
                finally:
                    os.kill(holder, signal.SIGCONT)
                break
            time.sleep(0.0005)

    watcher = threading.Thread(target=kill_mid_save, daemon=True)
    watcher.start()
    try:
        code, out, errors = _run_with_restart(b, part_config, checkpoints, "1 trainer per host")
    finally:
        done.set()
        watcher.join(TIMEOUT)
    assert killed, "no save was caught in progress: " + out[-2000:]
    assert code == 0, errors
    assert "attempt 0 failed" in errors and "killed by signal 9 (SIGKILL)" in errors, errors
    resumed = re.findall(r"\] resumed from checkpoint step (\d+) ", out)
    assert resumed and {int(s) for s in resumed} == {killed[0] - 5}, (killed, out)
    assert _result(out) == uninterrupted("1 trainer per host")
    assert not [p.name for p in checkpoints.iterdir() if p.name.endswith(".tmp")]
    (job,) = (b / "home" / "jobs").glob("*.json")
    assert leftovers(job.stem) == ([], [])
