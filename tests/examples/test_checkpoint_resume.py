"""Checkpoints in the examples: a run SIGKILLed mid-training and started again with the same
arguments resumes from its newest checkpoint and ends with the very bits of the uninterrupted
run (one standalone process on the CPU, fixed seeds: the same model checksum, the same printed
losses and accuracies)."""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from partitioner import partition_graph
from partitioner.generate import generate_graph
from testing.servers import REPO
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess
# One whole run of a script (most of it is importing torch on a busy 2-core machine).
RUN_TIMEOUT = 12 * TIMEOUT
BATCH = 200  # train_dist.py's batch size here
HETERO_BATCH = 64


def _run(argv: list[str]) -> str:
    """Run ``argv`` to its end; its stdout (the test fails with its stderr if it fails)."""
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


def _run_killed(argv: list[str], log: Path) -> str:
    """Run ``argv`` and SIGKILL it as soon as it prints its ``epoch 0:`` line (it is then in
    epoch 1, saving checkpoints); its stdout up to there."""
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=err, text=True)
    # A run that never prints the line is killed too, which ends the read below.
    watchdog = threading.Timer(RUN_TIMEOUT, proc.kill)
    watchdog.start()
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("epoch 0:"):
                proc.kill()
                break
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)
        assert proc.stdout is not None
        proc.stdout.close()
    out = "".join(lines)
    # A run that ended (or failed) before the kill would resume nothing worth testing.
    assert proc.returncode == -signal.SIGKILL and "model checksum" not in out, (
        f"{argv} was not killed during epoch 1 (exit {proc.returncode}):\n{out}\n"
        f"{log.read_text()}")
    return out


def _checksum(out: str) -> str:
    m = re.search(r"^model checksum ([0-9a-f]{64})$", out, re.M)
    assert m, out
    return m.group(1)


def _resumed_at(out: str) -> tuple[int, int, int]:
    """(step, epoch, batch) of the run's ``resumed from checkpoint`` line."""
    found = re.findall(r"^resumed from checkpoint step (\d+) \(epoch (\d+), batch (\d+)\)$",
                       out, re.M)
    assert len(found) == 1, out
    step, epoch, batch = (int(x) for x in found[0])
    return step, epoch, batch


def _test_accuracy(out: str) -> list[str]:
    """The ``test accuracy`` line, if the script prints one."""
    return re.findall(r"^test accuracy [0-9.]+$", out, re.M)


def _epochs(out: str) -> dict[int, str]:
    """Each epoch's line without its times (which differ from run to run)."""
    return {int(m.group(1)): m.group(0)
            for m in re.finditer(r"^epoch (\d+): [^\n]*?(?=, time )", out, re.M)}


def _resume_matches(argv: list[str], tmp_path: Path, reference: str) -> tuple[int, int, int]:
    """Kill ``argv`` (which checkpoints into a fresh folder) in epoch 1, run it again, and
    check that it resumes and ends as ``reference``, the uninterrupted run's output; where it
    resumed, (step, epoch, batch)."""
    killed = _run_killed(argv, tmp_path / "killed.err")
    assert "resumed from" not in killed, killed
    resumed = _run(argv)
    at = _resumed_at(resumed)
    assert at[0] > 0, resumed
    assert _checksum(resumed) == _checksum(reference), (reference, resumed)
    # The resumed run prints the epochs from the one it resumed in, with the same losses
    # (the resumed epoch's earlier ones come from the checkpoint) and accuracies.
    full, rest = _epochs(reference), _epochs(resumed)
    assert min(rest) == at[1] and rest == {e: full[e] for e in rest}, (reference, resumed)
    assert _test_accuracy(resumed) == _test_accuracy(reference), (reference, resumed)
    return at


@pytest.fixture(scope="module")
def train_dist(tmp_path_factory) -> tuple[list[str], int, str]:
    """train_dist.py's arguments on a 1-part partition, its batches per epoch, and the output
    of its uninterrupted run, checkpointing every 4 steps into a folder of its own."""
    graph = generate_graph(3000, avg_degree=10, seed=1)
    batches = math.ceil(int(graph.ndata["_N"]["train_mask"].sum()) / BATCH)
    parts = tmp_path_factory.mktemp("parts")
    partition_graph(graph, "g", 1, parts)
    argv = ["examples/train_dist.py", "--graph-name", "g", "--part-config",
            str(parts / "g.json"), "--batch-size", str(BATCH), "--num-epochs", "3",
            "--fan-out", "5,10"]  # --dropout 0.5 by default: the RNG's state matters
    ckpt = tmp_path_factory.mktemp("ckpt")
    reference = _run([*argv, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "4"])
    assert "resumed from" not in reference and (ckpt / "latest").is_file(), reference
    return argv, batches, reference


def test_train_dist_resumes_mid_epoch_bit_identically(train_dist, tmp_path):
    """Killed in epoch 1 and started again: resumed inside an epoch, the same end."""
    argv, batches, reference = train_dist
    _, _, batch = _resume_matches(
        [*argv, "--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "4"],
        tmp_path, reference)
    # Every 4 steps of 9-batch epochs: the checkpoints of these 3 epochs are all inside an
    # epoch, where dropout's draws for the rest of it come from the restored generators.
    assert 0 < batch < batches, (batch, batches)
    assert _test_accuracy(reference), reference


def test_train_dist_checkpoints_leave_the_result_alone(train_dist):
    """Saving draws nothing from the random generators: the run without checkpoints ends the
    same."""
    argv, _, reference = train_dist
    plain = _run(argv)
    assert "resumed from" not in plain
    assert _checksum(plain) == _checksum(reference)
    assert _epochs(plain) == _epochs(reference)


def test_link_resumes_bit_identically(tmp_path):
    """The DistEmbedding table and its SparseAdam state are restored too (the model's later
    steps read the rows, so the checksum shows them)."""
    partition_graph(generate_graph(600, avg_degree=10, seed=2), "g", 1, tmp_path / "p1")
    argv = ["examples/train_dist_link.py", "--graph-name", "g", "--part-config",
            str(tmp_path / "p1" / "g.json"), "--num-epochs", "2", "--batch-size", "512",
            "--checkpoint-every", "5"]
    reference = _run([*argv, "--checkpoint-dir", str(tmp_path / "a")])
    _resume_matches([*argv, "--checkpoint-dir", str(tmp_path / "b")], tmp_path, reference)


def test_hetero_resumes_at_an_epoch_end_bit_identically(tmp_path):
    """A checkpoint after an epoch's last batch: the resumed run starts with that epoch's
    (empty) rest, evaluates it and goes on."""
    graph = generate_graph(1000, avg_degree=8, hetero=True, seed=0)
    batches = math.ceil(int(graph.ndata["paper"]["train_mask"].sum()) / HETERO_BATCH)
    partition_graph(graph, "h", 1, tmp_path / "p1")
    argv = ["examples/train_dist_hetero.py", "--graph-name", "h", "--part-config",
            str(tmp_path / "p1" / "h.json"), "--num-epochs", "3", "--batch-size",
            str(HETERO_BATCH), "--checkpoint-every", str(batches)]
    reference = _run([*argv, "--checkpoint-dir", str(tmp_path / "a")])
    _, _, batch = _resume_matches([*argv, "--checkpoint-dir", str(tmp_path / "b")], tmp_path,
                                  reference)
    assert batch == batches
    assert _test_accuracy(reference), reference
