"""The one version number, read from the installed distribution's metadata folder."""

from __future__ import annotations

from importlib import metadata

import pytest

from partitioner.version import __version__, installed_version

pytestmark = pytest.mark.unit


def test_the_version_is_what_importlib_metadata_says():
    assert __version__ == metadata.version("dglctl")
    assert installed_version("dglctl") == metadata.version("dglctl")


def test_the_first_folder_on_the_path_wins_and_others_are_not_mistaken(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, name, version in ((first, "dglctl_extra-9.dist-info", "9"),
                                  (first, "dglctl-2.1.dist-info", "2.1.post1"),
                                  (second, "dglctl-3.0.dist-info", "3.0")):
        (folder / name).mkdir(parents=True)
        (folder / name / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: x\nVersion: {version}\n\nVersion: not a header\n")
    (tmp_path / "c" / "dglctl-4.dist-info").mkdir(parents=True)  # no METADATA: skipped
    missing = str(tmp_path / "nowhere")
    assert installed_version("dglctl", [missing, str(tmp_path / "c"), str(first),
                                        str(second)]) == "2.1.post1"
    assert installed_version("dglctl", [str(second), str(first)]) == "3.0"
    assert installed_version("dglctl", [missing, str(tmp_path / "c")]) is None
