"""``dglctl partition`` stopped by a signal removes its temporary output folder and exits
128 + N; a run killed outright leaves one behind, which the next run into the same parent
removes (issue 12, "faults and trust")."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from partitioner.generate import generate_graph
from partitioner.readers import write_npz
from testing.timeouts import TIMEOUT
from testing.wait import wait_until

pytestmark = pytest.mark.multiprocess

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph_npz(tmp_path_factory) -> Path:
    """A graph that takes METIS a few seconds to split in 4 parts with 2-hop halos: long enough
    that a run is still going when the test signals it."""
    path = tmp_path_factory.mktemp("signals") / "g.npz"
    write_npz(generate_graph(100_000, avg_degree=10, feat_dim=8, seed=0), path)
    return path


@pytest.fixture
def start_partition(tmp_path):
    """Start ``python -m dglctl partition`` of a graph into a folder; every process it started
    is killed at the end of the test."""
    procs: list[subprocess.Popen] = []

    def start(npz: Path, out: Path, *extra: str) -> subprocess.Popen:
        err = open(tmp_path / f"stderr-{len(procs)}.txt", "w+")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "dglctl", "partition", "--input", str(npz), "--num-parts",
             "4", "--halo-hops", "2", "--out", str(out), *extra],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
        )
        proc.stderr_file = err  # type: ignore[attr-defined]
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)
        proc.stderr_file.close()  # type: ignore[attr-defined]


def _stderr(proc: subprocess.Popen) -> str:
    proc.stderr_file.seek(0)  # type: ignore[attr-defined]
    return proc.stderr_file.read()  # type: ignore[attr-defined]


def _wait_for_temp_folder(proc: subprocess.Popen, out: Path) -> Path | None:
    """The run's ``.OUT.tmp-PID`` folder once it exists, or None if the run succeeded before
    the test saw it."""
    tmp = out.parent / f".{out.name}.tmp-{proc.pid}"

    def seen() -> str | None:
        if tmp.exists():
            return "folder"
        if proc.poll() is not None:
            assert proc.returncode == 0, f"partition failed:\n{_stderr(proc)}"
            return "ended"
        return None

    return tmp if wait_until(seen, f"{tmp} made", timeout=3 * TIMEOUT,
                             interval=0.005) == "folder" else None


def _frozen_mid_run(start_partition, npz: Path, out: Path,
                    *extra: str) -> tuple[subprocess.Popen, Path]:
    """Start a run and freeze it (SIGSTOP) while its temporary folder exists, so that it is
    certainly mid-run when signalled. A run that ends before the test looks is retried."""
    for _ in range(3):
        proc = start_partition(npz, out, *extra)
        tmp = _wait_for_temp_folder(proc, out)
        if tmp is not None:
            proc.send_signal(signal.SIGSTOP)
            if tmp.exists():
                return proc, tmp
            proc.send_signal(signal.SIGCONT)
        assert proc.wait(2 * TIMEOUT) == 0, _stderr(proc)
        shutil.rmtree(out)
    pytest.fail("every partition run ended before the test could signal it")


@pytest.mark.parametrize("signum, regime", [(signal.SIGTERM, "auto"), (signal.SIGINT, "auto"),
                                            (signal.SIGHUP, "auto"), (signal.SIGTERM, "lean")],
                         ids=["SIGTERM", "SIGINT", "SIGHUP", "SIGTERM-lean"])
def test_signal_removes_temp_folder_and_exits_128_plus_n(graph_npz, tmp_path, start_partition,
                                                         signum, regime):
    out = tmp_path / "p"
    for _ in range(3):
        proc, tmp = _frozen_mid_run(start_partition, graph_npz, out, "--regime", regime)
        proc.send_signal(signum)  # pending until the run goes on
        proc.send_signal(signal.SIGCONT)
        code = proc.wait(2 * TIMEOUT)
        err = _stderr(proc)
        if code != 128 + signum and (out / "g.json").exists():
            # Frozen as it committed its output (code the signal waits for): the output is
            # whole, and the signal ended the process once it was; try again for mid-run.
            assert code in (-signum, 128 + signum), err
            assert not tmp.exists() and "Traceback" not in err, err
            shutil.rmtree(out)
            continue
        assert code == 128 + signum, err
        assert signal.Signals(signum).name in err and "Traceback" not in err, err
        assert not tmp.exists() and not out.exists()
        assert not list(tmp_path.glob(".p.*")), list(tmp_path.iterdir())
        return
    pytest.fail("every partition run was frozen as it committed its output")


def test_signal_as_the_output_is_committed_ends_the_run_by_the_signal(tmp_path):
    """A signal that comes while the output folder is renamed into place (code that signals
    wait for) is neither lost nor reported as "nothing was written": the output stays whole
    and the signal ends the process once the partition block is over."""
    script = tmp_path / "commit_signal.py"
    script.write_text(
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "import partitioner.format as fmt\n"
        "from dglctl.commands.data import stopped_by_signals\n"
        "out = Path(sys.argv[1])\n"
        "commit = fmt._commit\n"
        "def signalled_commit(tmp, out):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # blocked: the watcher takes it\n"
        "    signal.sigtimedwait([], 0.3)  # let it try to interrupt the commit\n"
        "    commit(tmp, out)\n"
        "fmt._commit = signalled_commit\n"
        "with stopped_by_signals(out) as stop:\n"
        "    with fmt.atomic_output_dir(out, False, stop.output_written) as tmp:\n"
        "        (tmp / 'g.json').write_text('{}')\n"
        "    print('after the block', flush=True)\n"
        "print('not reached', flush=True)\n"
    )
    proc = _run_script(script, tmp_path / "p")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stdout == "after the block\n", proc.stdout
    assert (tmp_path / "p" / "g.json").exists()
    assert not list(tmp_path.glob(".p.*"))


def test_signal_whose_interrupted_is_swallowed_still_ends_the_run(tmp_path):
    """Code that catches ``Exception`` where the signal lands (a library's fallback) cannot
    lose it: the process still ends by the signal once the block is over."""
    script = tmp_path / "swallowed.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from dglctl.commands.data import stopped_by_signals\n"
        "with stopped_by_signals(Path(sys.argv[1])):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    try:\n"
        "        deadline = time.monotonic() + 5\n"
        "        while time.monotonic() < deadline:\n"
        "            pass\n"
        "    except Exception as exc:\n"
        "        print('swallowed', type(exc).__name__, flush=True)\n"
        "print('not reached', flush=True)\n"
    )
    proc = _run_script(script, tmp_path / "p")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stdout == "swallowed Interrupted\n", proc.stdout


def _run_script(script: Path, out: Path) -> subprocess.CompletedProcess:
    """``python SCRIPT OUT`` with the repository importable; its output."""
    return subprocess.run([sys.executable, str(script), str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=2 * TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_next_run_removes_temp_folder_of_a_killed_run(graph_npz, tmp_path, start_partition):
    out = tmp_path / "p"
    proc, stale = _frozen_mid_run(start_partition, graph_npz, out)
    proc.kill()  # SIGKILL: no handler runs, the folder stays
    proc.wait(TIMEOUT)
    assert stale.exists()
    live = tmp_path / f".p.tmp-{os.getpid()}"  # this test's own process is alive: kept
    live.mkdir()
    again = start_partition(graph_npz, out)
    assert again.wait(6 * TIMEOUT) == 0, _stderr(again)
    assert not stale.exists() and live.exists()
    assert (out / "g.json").exists()
