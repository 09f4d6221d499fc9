"""The project is the user's live folder: the launcher's own log inside it, a file appended to
and a file deleted while the launch copies, none of them breaks the launch. What is verified on
the hosts is the checksum of the bytes that were sent. Real launches on the local cluster."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dglctl.cli import main
from dglctl.jobs.manifest import list_jobs
from testing.procs import leftovers
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess

TRAIN = "import os\nprint(f\"OUT rank={os.environ['RANK']}\", flush=True)\n"


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text(TRAIN)
    return root


def _copies(job_id: str) -> list[Path]:
    """Each host's copy of the project, for job ``job_id``."""
    (m,) = [j for j in list_jobs() if j.job_id == job_id]
    return [next((Path(h.workspace) / "work").iterdir()) for h in m.hosts]


def test_the_launchers_own_log_inside_the_project_is_not_shipped(parts, home, local_cluster,
                                                                   project):
    """``dglctl launch train.py > run.log 2>&1`` from the script's folder: the log grows while
    the launch copies (it once failed every time: 'copied file(s) fail their checksum')."""
    log = project / "run.log"
    with open(log, "w") as out:
        p = subprocess.run([sys.executable, "-m", "dglctl", "launch", "--cluster",
                            str(local_cluster), "--part-config", str(parts[2]), "train.py"],
                           cwd=project, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=30 * TIMEOUT)
    text = log.read_text()
    assert p.returncode == 0, text
    assert text.count("OUT rank=") == 2 and "[2/5] copy" in text, text
    job = list_jobs()[-1]
    for copy in _copies(job.job_id):
        assert sorted(f.name for f in copy.iterdir()) == ["train.py"]
    assert leftovers(job.job_id) == ([], [])


def test_a_file_appended_to_during_the_launch_is_sent_as_read(parts, home, local_cluster,
                                                              project, capsys):
    grows = project / "metrics.csv"
    grows.write_text("step,loss\n")
    stop = threading.Event()

    def append() -> None:
        i = 0
        while not stop.is_set():
            with open(grows, "a") as f:
                f.write(f"{i},0.5\n")
            i += 1
            time.sleep(0.002)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        code = main(["launch", "--cluster", str(local_cluster), "--part-config",
                     str(parts[2]), str(project / "train.py")])
    finally:
        stop.set()
        writer.join(TIMEOUT)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.count("OUT rank=") == 2
    warnings = [line for line in out.err.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: project files changed while copied, sent as read: "
                        "metrics.csv"], out.err
    final = grows.read_bytes()
    for copy in _copies(list_jobs()[-1].job_id):
        sent = (copy / "metrics.csv").read_bytes()
        # What arrived is the file as it was read: a whole prefix of it, more than at listing.
        assert final.startswith(sent) and len(sent) > len(b"step,loss\n"), len(sent)


def test_a_file_deleted_during_the_launch_is_left_out_here_and_there(
        parts, home, local_cluster, project, capsys, monkeypatch):
    doomed = project / "scratch.txt"
    doomed.write_text("v1\n")
    base = ["launch", "--cluster", str(local_cluster), "--part-config", str(parts[2]),
            str(project / "train.py")]
    assert main(base) == 0, capsys.readouterr().err
    first = list_jobs()[-1].job_id
    assert all((c / "scratch.txt").read_text() == "v1\n" for c in _copies(first))
    capsys.readouterr()
    # Changed, so it is to be copied again; then deleted after it was listed, before the copy.
    doomed.write_text("v2, longer\n")
    from dglctl.jobs.launcher import Launcher

    preflight = Launcher.preflight

    def preflight_then_delete(self) -> None:
        preflight(self)
        doomed.unlink()

    monkeypatch.setattr(Launcher, "preflight", preflight_then_delete)
    code = main(base)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.count("OUT rank=") == 2
    assert "warning: project files deleted while copied, left out: scratch.txt" in out.err
    for copy in _copies(list_jobs()[-1].job_id):
        assert sorted(f.name for f in copy.iterdir()) == ["train.py"]  # gone there too


KEEPS = """import os
from pathlib import Path

mine = Path("out") / f"rank-{os.environ['RANK']}.txt"
print(f"OUT rank={os.environ['RANK']} found={mine.exists()}", flush=True)
mine.parent.mkdir(exist_ok=True)
mine.write_text("written by the job")
"""


def test_what_a_job_writes_into_its_copy_survives_the_next_launch(parts, home, local_cluster,
                                                                  project, capsys):
    """A job's output under its cwd (the host's copy of the project: a relative
    ``--checkpoint-dir`` lands there) is not the launcher's to delete: the next launch keeps
    it, and removes only a file it shipped that is gone here, saying so."""
    (project / "train.py").write_text(KEEPS)
    helper = project / "helper.py"
    helper.write_text("x = 1\n")
    base = ["launch", "--cluster", str(local_cluster), "--part-config", str(parts[2]),
            str(project / "train.py")]
    assert main(base) == 0, capsys.readouterr().err
    first = capsys.readouterr().out
    assert first.count("found=False") == 2, first
    helper.unlink()
    assert main(base) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert out.out.count("found=True") == 2, out.out  # every rank's file from the first job
    said = [line for line in out.out.splitlines() + out.err.splitlines() if "removed 1" in line]
    assert len(said) == 2 and all("no longer in the project: helper.py" in s for s in said), \
        out.out + out.err
    for copy in _copies(list_jobs()[-1].job_id):
        assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == \
            ["out", *sorted(f"out/rank-{r}.txt" for r in
                            ((0,) if copy.parts[-3].endswith("m0") else (1,))),
             "train.py"], copy
