"""``pip install .`` gives a working dglctl, without the source tree (issue 13).

The wheel is built from a copy of the repository (so no ``build/`` appears in the checkout and
no stale build output can slip in), checked for its package data and for what must stay out,
then installed with ``--no-deps`` into a fresh virtual environment. That environment reuses
the test interpreter's installed dependencies (torch, numba, METIS, ...) through a ``.pth``
line naming their site-packages: a plain path line, so the ``.pth`` files there, among them
the editable install's finder for this checkout, are not run. The demo then runs from an
empty folder outside the repository, with no PYTHONPATH, and must import the installed copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest

from testing.timeouts import TIMEOUT

pytestmark = [pytest.mark.multiprocess, pytest.mark.wheel]

REPO = Path(__file__).resolve().parents[1]
# What the copy leaves out: .gitignore's outputs and caches (the wheel never needs them).
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                  ".pytest_cache", ".ruff_cache", "demo-out", "bench-out",
                                  ".whl", ".gl")
PACKAGE_DATA = ("dglctl/data/local.yaml", "dglctl/data/train_dist.py",
                "dglctl/data/train_dist_hetero.py", "dglctl/data/train_dist_link.py")


def _run(argv: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run ``argv``; fail with its output when it exits non-zero."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built offline with the test interpreter's setuptools."""
    src = tmp_path_factory.mktemp("src") / "dglctl"
    shutil.copytree(REPO, src, symlinks=True, ignore=LEFT_OUT)
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-q", "-w", str(out), str(src)], timeout=12 * TIMEOUT)
    (found,) = out.glob("dglctl-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (no deps) and the test interpreter's
    site-packages on its path for the dependencies."""
    root = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], timeout=6 * TIMEOUT)
    python = root / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], timeout=12 * TIMEOUT)
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                timeout=3 * TIMEOUT).stdout.strip()
    # "00-": before the venv's other .pth files, so theirs can import from the deps too.
    (Path(site) / "00-repo-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root


def _env(venv: Path) -> dict[str, str]:
    """The environment of a user of the venv: its bin first on PATH, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def test_wheel_holds_the_package_data_and_nothing_else(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for name in (*PACKAGE_DATA, "dglctl/commands/examples.py", "dglctl/demo.py"):
        assert name in names, name
    dist_info = "dglctl-0.1.0.dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names, [n for n in names if "dist-info" in n]
    tops = {n.split("/")[0] for n in names}
    assert tops == {"dglctl", "partitioner", "runtime", dist_info}, tops
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".nbc"))]
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "Requires-Dist: torch>=2.13" in metadata
    assert "License-Expression: Apache-2.0" in metadata


def test_installed_dglctl_is_the_wheel_not_the_checkout(venv, tmp_path):
    env = _env(venv)
    where = _run([str(venv / "bin" / "python"), "-c",
                  "import dglctl, runtime, partitioner, torch; "
                  "print(dglctl.__file__, runtime.__file__, partitioner.__file__)"],
                 timeout=6 * TIMEOUT, cwd=tmp_path, env=env).stdout.split()
    for file in where:
        assert Path(file).resolve().is_relative_to(venv.resolve()), where
    listed = _run([str(venv / "bin" / "dglctl"), "examples"], timeout=6 * TIMEOUT,
                  cwd=tmp_path, env=env).stdout.split()
    assert [Path(p).name for p in listed] == [
        "train_dist.py", "train_dist_hetero.py", "train_dist_link.py", "local.yaml"], listed
    assert all(Path(p).is_file() and Path(p).resolve().is_relative_to(venv.resolve())
               for p in listed), listed


def test_demo_runs_from_an_empty_folder(venv, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _run([str(venv / "bin" / "python"), "-m", "dglctl.demo"], timeout=24 * TIMEOUT,
                cwd=empty, env=_env(venv))
    assert "test accuracy" in done.stdout, done.stdout
    launch = next(line for line in done.stdout.splitlines() if line.startswith("$ dglctl launch"))
    assert "--cluster" not in launch and str(venv.resolve()) in launch, launch
    assert (empty / "demo-out" / "parts" / "demo.json").is_file()
