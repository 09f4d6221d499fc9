"""Paths in a part config never lead outside its folder (issue 12, "faults and trust").

A part config names every file it uses by a path relative to its folder; ``dglctl launch``
copies those files to each host and the servers read them. A path with ``..``, an absolute one
or one through a symlink that leaves the folder would be followed there, so each one is refused
with a PartitionFormatError that names the config, the key and the value.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from partitioner import load_partition, partition_graph
from partitioner.errors import PartitionFormatError
from partitioner.format import load_array, read_config, verify_files
from testing.graphs import community_graph, hetero_graph

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A 2-part homogeneous and a 2-part heterogeneous partition, as dglctl writes them."""
    root = tmp_path_factory.mktemp("paths")
    partition_graph(community_graph(n=200), "g", 2, root / "homo")
    partition_graph(hetero_graph(), "h.v1-x_y", 2, root / "hetero", halo_hops=2)
    return {"homo": root / "homo" / "g.json", "hetero": root / "hetero" / "h.v1-x_y.json"}


@pytest.fixture
def copy(written, tmp_path):
    """A private copy of the homogeneous partition at ``tmp_path/parts`` and its JSON."""
    shutil.copytree(written["homo"].parent, tmp_path / "parts")
    path = tmp_path / "parts" / "g.json"
    return path, json.loads(path.read_text())


def _tamper(path, config, edit):
    edit(config)
    path.write_text(json.dumps(config))
    return path


def _refused(path, *words):
    with pytest.raises(PartitionFormatError) as e:
        read_config(path)
    assert str(path) in e.value.message, e.value.message
    for w in words:
        assert w in e.value.message, (w, e.value.message)
    return e.value


def test_written_partitions_stay_valid(written):
    for path in written.values():
        cfg = read_config(path)
        assert load_partition(cfg, 1, verify=True).node_feats()
        assert not verify_files(cfg)


BAD_PATHS = ["../../evil", "/etc/passwd", "part0/../../evil", "part0//x.npy", "./part0/x.npy",
             "part0/.", "part0/x y.npy", "part0/x\n.npy", "part0/\x00.npy", "", "part0\\x.npy",
             "part0/", "~/.ssh/authorized_keys", "part0/ünï.npy"]


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_a_bad_files_key_is_refused(copy, bad):
    path, cfg = copy
    _tamper(path, cfg, lambda c: c["files"].update({bad: {"size": 1, "xxh3_128": "0"}}))
    _refused(path, "'files'", repr(bad))


@pytest.mark.parametrize("where", [
    ("part-0", "halo_nids"), ("part-1", "csc", "_N:_E:_N", "indptr"),
    ("part-0", "csr", "_N:_E:_N", "eids"), ("part-1", "node_feat_files", "_N/feat"),
    ("part-0", "part_graph"), ("orig_nids", "_N"), ("orig_eids", "_N:_E:_N")])
@pytest.mark.parametrize("bad", ["../../evil.npy", "/tmp/evil.npy", "part0/../../../x.npy", 7])
def test_a_bad_path_value_is_refused(copy, where, bad):
    path, cfg = copy

    def edit(c):
        d = c
        for k in where[:-1]:
            d = d[k]
        d[where[-1]] = bad

    _tamper(path, cfg, edit)
    _refused(path, *(repr(k) for k in where), repr(bad))


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", ".", "..", "g\x00", "g h", "~g", 3])
def test_an_unsafe_graph_name_is_refused(copy, bad):
    path, cfg = copy
    _tamper(path, cfg, lambda c: c.update(graph_name=bad))
    _refused(path, "'graph_name'", repr(bad))


def test_a_symlink_out_of_the_folder_is_refused(copy, tmp_path):
    path, cfg = copy
    parts = path.parent
    outside = tmp_path / "outside"
    outside.mkdir()
    # A file replaced by a link to a look-alike outside: reading it would read that file.
    halo = parts / "part0" / "halo_nids.npy"
    shutil.copy(halo, outside / "halo_nids.npy")
    halo.unlink()
    halo.symlink_to(outside / "halo_nids.npy")
    _refused(path, "'part-0'", "'halo_nids'", "part0/halo_nids.npy", "outside the folder")
    halo.unlink()
    shutil.copy(outside / "halo_nids.npy", halo)
    read_config(path)
    # A whole part folder as a link: every file of it is outside.
    shutil.move(parts / "part1", outside / "part1")
    (parts / "part1").symlink_to(outside / "part1")
    _refused(path, "part1/")


def test_a_symlink_inside_the_folder_is_followed(copy):
    path, cfg = copy
    parts = path.parent
    shutil.move(parts / "part1", parts / "moved")
    (parts / "part1").symlink_to("moved")
    part = load_partition(read_config(path), 1, verify=True)
    assert len(part.halo_nids) > 0


def test_the_loader_checks_a_config_given_as_a_dict(copy, tmp_path):
    """``load_partition`` and ``load_array`` also take a config dict (not read from a file):
    what they open is checked there too."""
    path, _ = copy
    cfg = read_config(path)
    np.save(tmp_path / "evil.npy", np.arange(3))
    cfg["part-0"]["halo_nids"] = "../evil.npy"
    with pytest.raises(PartitionFormatError, match=r"\['part-0'\]\['halo_nids'\] = '\.\./evil"):
        _ = load_partition(cfg, 0).halo_nids
    with pytest.raises(PartitionFormatError, match="'/etc/passwd'"):
        load_array(cfg, "/etc/passwd")
    cfg["files"]["../evil.npy"] = {"size": 1, "xxh3_128": "0"}
    with pytest.raises(PartitionFormatError, match="'files'"):
        verify_files(cfg)


def test_check_part_path_names_what_it_refuses(tmp_path):
    from partitioner.paths import check_part_path

    root = tmp_path
    assert check_part_path(root, "part0/graph/0_indptr.npy", "cfg.json", "files") == \
        (root / "part0/graph/0_indptr.npy")
    with pytest.raises(PartitionFormatError) as e:
        check_part_path(root, "a/../../b", "cfg.json", "files")
    assert e.value.message.startswith("cfg.json: ") and "'a/../../b'" in e.value.message
    if hasattr(os, "symlink"):
        (root / "up").symlink_to("..")
        with pytest.raises(PartitionFormatError, match="outside the folder"):
            check_part_path(root, "up/x.npy", "cfg.json", "files")
