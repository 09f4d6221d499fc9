"""Partitioning by a given assignment (``--assignment`` / ``assignment=``): a run's saved
assignment given back writes the same parts, byte for byte; bad files are refused naming the
file, the line or index and the value, and leave nothing behind; trainer pieces of a given
assignment are dealt round robin within each part."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from partitioner import partition_graph
from partitioner.assignment import pieces_of, read_assignment, write_assignment
from partitioner.errors import PartitionInputError
from partitioner.generate import generate_graph
from partitioner.readers import write_npz

pytestmark = pytest.mark.unit


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a partition folder but its JSON config, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix != ".json"}


@pytest.mark.parametrize("hetero", [False, True], ids=["homogeneous", "heterogeneous"])
def test_a_saved_assignment_given_back_writes_the_same_parts(tmp_path, hetero):
    g = generate_graph(600, avg_degree=6, seed=3, hetero=hetero)
    saved = tmp_path / "assign.npy"
    first = partition_graph(g, "g", 3, tmp_path / "metis", method="metis",
                            save_assignment=saved)
    part = np.load(saved)
    assert part.shape == (g.total_nodes,) and set(part.tolist()) == {0, 1, 2}
    again = partition_graph(g, "g", 3, tmp_path / "given", assignment=saved)
    assert again["part_method"] == "assignment" and first["part_method"] == "metis"
    written = _files(tmp_path / "metis")
    assert len(written) > 6 and _files(tmp_path / "given") == written
    for key in ("node_map", "edge_map", "num_nodes", "num_edges"):
        assert again[key] == first[key], key
    # As text (one id per line, comments allowed), and as an array: the same parts again.
    text = tmp_path / "assign.txt"
    text.write_text("# from another partitioner\n" + "\n".join(map(str, part)) + "\n")
    partition_graph(g, "g", 3, tmp_path / "text", assignment=text)
    partition_graph(g, "g", 3, tmp_path / "array", assignment=part.astype(np.int32))
    assert _files(tmp_path / "text") == _files(tmp_path / "metis")
    assert _files(tmp_path / "array") == _files(tmp_path / "metis")


def test_trainer_pieces_are_dealt_round_robin_within_each_part(tmp_path):
    part = np.array([1, 0, 1, 1, 0, 2, 1])
    assert pieces_of(part, 1) is part
    # part 0: nodes 1, 4 -> pieces 0, 1; part 1: nodes 0, 2, 3, 6 -> 2, 3, 2, 3; part 2: 4
    assert pieces_of(part, 2).tolist() == [2, 0, 3, 2, 1, 4, 3]
    g = generate_graph(400, avg_degree=6, seed=1)
    given = np.arange(g.total_nodes) % 2
    cfg = partition_graph(g, "g", 2, tmp_path / "p", assignment=given, trainers_per_machine=2)
    assert cfg["num_trainers_per_machine"] == 2


@pytest.mark.parametrize("content, message", [
    ("0\n1\nx\n", r"a.txt:3: 'x' is not a part id"),
    ("0\n1\n0\n7\n" + "1\n" * 396, r"a.txt:4: part 7 is not in 0..1 \(--num-parts 2; 1 such"),
    ("0\n1\n", r"a.txt: the assignment gives 2 parts, the graph has 400 nodes"),
    ("0\n" * 400, r"a.txt: the assignment leaves part 1 empty"),
])
def test_a_bad_assignment_is_refused_naming_where_and_nothing_is_written(tmp_path, content,
                                                                         message):
    g = generate_graph(400, avg_degree=6, seed=1)
    bad = tmp_path / "a.txt"
    bad.write_text(content)
    with pytest.raises(PartitionInputError, match=message):
        partition_graph(g, "g", 2, tmp_path / "out", assignment=bad,
                        save_assignment=tmp_path / "saved.npy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"], "nothing left behind"


def test_a_bad_npy_assignment_names_the_index(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.array([0, 1, -1, 1]))
    with pytest.raises(PartitionInputError, match=r"a.npy: part -1 at index 2 is not in 0..1"):
        read_assignment(path, 4, 2)
    np.save(path, np.zeros((2, 2), np.int64))
    with pytest.raises(PartitionInputError, match="must be a 1-D integer array"):
        read_assignment(path, 4, 2)


def test_the_cli_saves_and_takes_an_assignment(tmp_path, capsys):
    from dglctl.cli import main

    g = generate_graph(500, avg_degree=6, seed=2)
    src = tmp_path / "g.npz"
    write_npz(g, src)
    saved = tmp_path / "a.npy"
    assert main(["partition", "--input", str(src), "--num-parts", "2", "--out", str(tmp_path / "m"),
                 "--save-assignment", str(saved)]) == 0
    assert main(["partition", "--input", str(src), "--num-parts", "2", "--out", str(tmp_path / "a"),
                 "--assignment", str(saved), "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"):])["part_method"] == "assignment"
    assert _files(tmp_path / "a") == _files(tmp_path / "m")
    code = main(["partition", "--input", str(src), "--num-parts", "2", "--out", str(tmp_path / "x"),
                 "--assignment", str(saved), "--method", "metis"])
    assert code == 2 and "--assignment and --method" in capsys.readouterr().err


def test_the_cli_saves_a_text_assignment_under_a_text_name_and_takes_it_back(tmp_path, capsys):
    """``--save-assignment a.txt`` writes text (one part id per line), which ``--assignment``
    reads back into the same parts; only a ``.npy`` name gets numpy's format."""
    from dglctl.cli import main

    g = generate_graph(500, avg_degree=6, seed=2)
    src = tmp_path / "g.npz"
    write_npz(g, src)
    saved = tmp_path / "a.txt"
    assert main(["partition", "--input", str(src), "--num-parts", "3", "--out", str(tmp_path / "m"),
                 "--save-assignment", str(saved)]) == 0, capsys.readouterr().err
    text = saved.read_bytes()
    assert not text.startswith(b"\x93NUMPY"), "a .txt name gets text, not .npy bytes"
    lines = text.decode("ascii").splitlines()
    assert len(lines) == g.total_nodes and set(lines) == {"0", "1", "2"}
    capsys.readouterr()
    assert main(["partition", "--input", str(src), "--num-parts", "3", "--out", str(tmp_path / "a"),
                 "--assignment", str(saved)]) == 0, capsys.readouterr().err
    written = _files(tmp_path / "m")
    assert len(written) > 6 and _files(tmp_path / "a") == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a.txt", "g.npz", "m"], \
        "no temporary file left beside the assignment"


def test_write_assignment_writes_text_for_any_name_but_npy(tmp_path):
    part = np.array([0, 7, 10, 123456789012, 3, 99, 100, -1])
    for name in ("a.txt", "a", "a.csv"):
        write_assignment(tmp_path / name, part)
        assert (tmp_path / name).read_text() == "".join(f"{p}\n" for p in part.tolist())
    write_assignment(tmp_path / "a.npy", part)
    assert np.load(tmp_path / "a.npy").tolist() == part.tolist()
    write_assignment(tmp_path / "empty.txt", np.array([], np.int64))
    assert (tmp_path / "empty.txt").read_bytes() == b""


def test_npy_bytes_under_a_text_name_are_read_as_npy(tmp_path):
    """A file an earlier ``--save-assignment a.txt`` wrote as ``.npy`` bytes still reads."""
    old = tmp_path / "a.txt"
    with open(old, "wb") as f:
        np.save(f, np.array([1, 0, 1, 0], np.int64))
    assert read_assignment(old, 4, 2).tolist() == [1, 0, 1, 0]


def test_a_binary_file_that_is_no_npy_is_refused_naming_it(tmp_path):
    bad = tmp_path / "a.bin"
    bad.write_bytes(b"\x80\x04\x95 not text")
    with pytest.raises(PartitionInputError, match=r"a.bin: cannot read the assignment") as e:
        read_assignment(bad, 4, 2)
    assert ".npy" in e.value.hint
