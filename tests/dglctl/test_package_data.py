"""The local default cluster and the demo's script are package data: an installed dglctl (not
only a source tree) has them, and configs/ and examples/ link to the same files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dglctl import demo
from dglctl.commands.launch import DEFAULT_CLUSTER
from dglctl.config import load_cluster_config

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_defaults_live_in_the_package():
    package = Path(demo.__file__).resolve().parent
    assert DEFAULT_CLUSTER.parent == package / "data" == demo.DATA
    assert load_cluster_config(DEFAULT_CLUSTER).transport == "local"
    assert (demo.DATA / "train_dist.py").is_file()
    for link, target in ((REPO / "configs" / "local.yaml", DEFAULT_CLUSTER),
                         (REPO / "examples" / "train_dist.py", demo.DATA / "train_dist.py")):
        assert link.resolve() == target.resolve(), link


def test_pyproject_ships_them():
    text = (REPO / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]' in text and '"data/*.yaml", "data/*.py"' in text
