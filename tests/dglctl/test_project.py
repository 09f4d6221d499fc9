"""A project, not a file: --workdir (default SCRIPT's folder) is shipped to every host,
checksummed and updated incrementally, with .dglctlignore; -m runs a module of it; the
trainers run in its copy. Real launches on the local cluster."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from dglctl.cli import main
from dglctl.jobs.manifest import list_jobs
from testing.procs import leftovers

pytestmark = pytest.mark.multiprocess

TRAIN = """\
import os
import sys
from model import describe
from tools.util import twice
print(f"OUT rank={os.environ['RANK']} {describe()} {twice(21)} cwd={os.getcwd()} "
      f"args={sys.argv[1:]}", flush=True)
"""


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / "tools").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "train.py").write_text(TRAIN)
    (root / "model.py").write_text("def describe():\n    return 'model-v1'\n")
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "tools" / "__main__.py").write_text(textwrap.dedent("""\
        import os, sys
        from tools.util import twice
        print(f"OUT module rank={os.environ['RANK']} {twice(5)} args={sys.argv[1:]}",
              flush=True)
        """))
    (root / "data" / "big.npy").write_bytes(b"x" * 4096)
    (root / "notes.bin").write_bytes(b"y" * 100)
    (root / ".dglctlignore").write_text("# not for the hosts\ndata/\n*.bin\n")
    return root


def _launch(argv, capsys) -> tuple[int, str, str]:
    code = main(["launch", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _work_dirs(job_id: str) -> list[Path]:
    m = list_jobs()[-1]
    assert m.job_id == job_id
    return [Path(h.workspace) for h in m.hosts]


def test_a_script_that_imports_its_siblings_runs_in_the_projects_copy(
        parts, home, local_cluster, project, capsys):
    base = ["--cluster", str(local_cluster), "--part-config", str(parts[2])]
    code, out, err = _launch([*base, str(project / "train.py"), "--epochs", "3"], capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "OUT " in line]
    assert len(lines) == 2 and all("model-v1 42" in x and "args=['--epochs', '3']" in x
                                   for x in lines), out
    job = list_jobs()[-1]
    for ws in _work_dirs(job.job_id):
        (copy,) = (ws / "work").iterdir()
        assert copy.name.startswith("proj-")
        shipped = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
        assert shipped == ["model.py", "tools/__init__.py", "tools/__main__.py",
                           "tools/util.py", "train.py"], shipped
        assert any(f"cwd={copy}" in x for x in lines)
    assert leftovers(job.job_id) == ([], [])
    # A change ships that file alone; the job sees the new version.
    (project / "model.py").write_text("def describe():\n    return 'model-v2'\n")
    code, out, err = _launch([*base, str(project / "train.py")], capsys)
    assert code == 0, err
    assert out.count("model-v2 42") == 2
    assert re.findall(r"m\d: (\d+) file\(s\)", err) == ["1", "1"], err
    # A file deleted here is deleted from the hosts' copies too.
    (project / "tools" / "__main__.py").unlink()
    code, out, err = _launch([*base, str(project / "train.py")], capsys)
    assert code == 0, err
    for ws in _work_dirs(list_jobs()[-1].job_id):
        (copy,) = (ws / "work").iterdir()
        assert not (copy / "tools" / "__main__.py").exists()
        assert (copy / "tools" / "util.py").exists()


def test_module_of_the_project(parts, home, local_cluster, project, capsys, monkeypatch):
    monkeypatch.chdir(project)  # -m ships the current folder by default
    code, out, err = _launch(["--cluster", str(local_cluster), "--part-config", str(parts[2]),
                              "-m", "tools", "--part-config", "not-the-launchers"], capsys)
    assert code == 0, err
    assert out.count("OUT module") == 2 and "10 args=['--part-config', 'not-the-launchers']" in out
    assert list_jobs()[-1].script == "-m tools"


def test_project_errors_are_named(parts, home, local_cluster, project, tmp_path, capsys):
    base = ["--cluster", str(local_cluster), "--part-config", str(parts[2]), "--dry-run"]
    code, _, err = _launch([*base, "--workdir", str(project), "-m", "nope.train"], capsys)
    assert code == 2 and "neither nope/train.py nor nope/train/__main__.py" in err, err
    other = tmp_path / "elsewhere.py"
    other.write_text("print('x')\n")
    code, _, err = _launch([*base, "--workdir", str(project), str(other)], capsys)
    assert code == 2 and "is not inside --workdir" in err, err
    code, _, err = _launch([*base, str(project / "notes.bin")], capsys)
    assert code == 2 and "excluded by .dglctlignore" in err, err
    assert list_jobs() == []


def test_a_big_project_is_warned_about(parts, home, local_cluster, project, capsys,
                                       monkeypatch):
    monkeypatch.setattr("dglctl.jobs.launcher.WARN_BYTES", 100)
    code, _, err = _launch(["--cluster", str(local_cluster), "--part-config", str(parts[2]),
                            "--dry-run", str(project / "train.py")], capsys)
    assert code == 0, err
    assert f"warning: the project {project} is" in err and "shipped to every host" in err


def test_a_relative_script_path(parts, home, local_cluster, project, capsys, monkeypatch):
    monkeypatch.chdir(project.parent)
    code, out, err = _launch(["--cluster", str(local_cluster), "--part-config", str(parts[2]),
                              "proj/train.py"], capsys)
    assert code == 0, err
    assert out.count("model-v1 42") == 2


def test_the_partition_and_the_workspaces_inside_the_project_are_not_shipped(
        home, local_cluster, tmp_path, capsys):
    """A script beside its partition and the local cluster's workspaces: the project is the
    script alone (the workspaces once went into the project, and into themselves, again)."""
    import yaml

    from partitioner import partition_graph
    from testing.graphs import community_graph

    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text("print('OUT ran', flush=True)\n")
    partition_graph(community_graph(n=400), "g", 2, root / "parts")
    data = yaml.safe_load(local_cluster.read_text())
    local_cluster.write_text(yaml.safe_dump({**data, "workspace": str(root / "ws")}))
    for _ in range(2):
        code, out, err = _launch(["--cluster", str(local_cluster), "--part-config",
                                  str(root / "parts" / "g.json"), str(root / "train.py")], capsys)
        assert code == 0, err
        assert out.count("OUT ran") == 2
    for host in ("m0", "m1"):
        (copy,) = (root / "ws" / host / "work").iterdir()
        assert sorted(p.name for p in copy.rglob("*")) == ["train.py"]
