"""Tests for the graph readers and writers: npz, text edge lists, DGL chunked, read_graph."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

import numpy as np
import pytest

from partitioner.errors import OutputExistsError, PartitionInputError, PartitionOptionError
from partitioner.generate import generate_graph
from partitioner.graph import HOMO_ETYPE, HOMO_NTYPE, Graph
from partitioner.readers import (
    detect_format,
    read_chunked,
    read_edge_list,
    read_graph,
    read_npz,
    write_chunked,
    write_edge_list,
    write_npz,
)
from partitioner.readers.text_writer import format_edge_lines

pytestmark = pytest.mark.unit


def assert_same_graph(a: Graph, b: Graph) -> None:
    """Exact equality of types, counts, edges and all feature arrays (dtype included)."""
    assert a.num_nodes == b.num_nodes
    assert list(a.num_nodes) == list(b.num_nodes)
    assert a.canonical_etypes == b.canonical_etypes
    for etype in a.canonical_etypes:
        for x, y in zip(a.edges[etype], b.edges[etype], strict=True):
            assert x.dtype == y.dtype == np.int64
            np.testing.assert_array_equal(x, y)
    for store_a, store_b in ((a.ndata, b.ndata), (a.edata, b.edata)):
        keys = {k for k, v in store_a.items() if v} | {k for k, v in store_b.items() if v}
        for key in keys:
            fa, fb = store_a.get(key, {}), store_b.get(key, {})
            assert set(fa) == set(fb), key
            for name in fa:
                assert fa[name].dtype == fb[name].dtype
                np.testing.assert_array_equal(fa[name], fb[name])


def small_graph(with_weight: bool = True) -> Graph:
    src = np.array([0, 1, 2, 3, 4, 0], dtype=np.int64)
    dst = np.array([1, 2, 3, 4, 0, 3], dtype=np.int64)
    ndata = {
        "feat": np.arange(12, dtype=np.float32).reshape(6, 2),
        "label": np.array([0, 1, 0, 1, 1, 0], dtype=np.int64),
        "train_mask": np.array([1, 0, 1, 0, 1, 0], dtype=bool),
    }
    edata = {"weight": np.linspace(0.5, 3.0, 6)} if with_weight else {}
    return Graph.homogeneous(src, dst, 6, ndata=ndata, edata=edata)


@contextmanager
def raises_input(match_file, *, line: int | None = None):
    """Expect a PartitionInputError whose message names ``match_file`` (and ``line``)."""
    with pytest.raises(PartitionInputError) as info:
        yield info
    message = str(info.value)
    assert os.path.basename(str(match_file)) in message, message
    if line is not None:
        assert f":{line}:" in message, message
        assert info.value.line == line


# ----------------------------------------------------------------------------- npz


def test_npz_round_trip(tmp_path):
    g = small_graph()
    path = tmp_path / "g.npz"
    write_npz(g, path)
    assert_same_graph(g, read_npz(path))
    assert [p.name for p in tmp_path.iterdir()] == ["g.npz"]  # no temp file left behind


def test_npz_round_trip_generated_and_compressed(tmp_path):
    g = generate_graph(500, avg_degree=6, seed=2)
    write_npz(g, tmp_path / "a.npz", compress=True)
    assert_same_graph(g, read_graph(tmp_path / "a.npz"))


def test_npz_csr_input(tmp_path):
    indptr = np.array([0, 2, 2, 3, 5])
    indices = np.array([1, 3, 0, 1, 2])
    path = tmp_path / "csr.npz"
    np.savez(path, indptr=indptr, indices=indices, **{"node:x": np.arange(4.0)})
    g = read_npz(path)
    assert g.num_nodes == {HOMO_NTYPE: 4}
    np.testing.assert_array_equal(g.edges[HOMO_ETYPE][0], [0, 0, 2, 3, 3])
    np.testing.assert_array_equal(g.edges[HOMO_ETYPE][1], [1, 3, 0, 1, 2])
    # CSR -> write (COO) -> read gives the same graph.
    write_npz(g, tmp_path / "coo.npz")
    assert_same_graph(g, read_npz(tmp_path / "coo.npz"))


def test_npz_num_nodes_inferred(tmp_path):
    np.savez(tmp_path / "a.npz", src=np.array([0, 5]), dst=np.array([2, 1]))
    assert read_npz(tmp_path / "a.npz").num_nodes == {HOMO_NTYPE: 6}
    # Features with more rows than max id + 1 reveal isolated trailing nodes.
    np.savez(tmp_path / "b.npz", src=np.array([0]), dst=np.array([1]), **{"node:f": np.zeros(4)})
    assert read_npz(tmp_path / "b.npz").num_nodes == {HOMO_NTYPE: 4}
    np.savez(tmp_path / "c.npz", src=np.array([0]), dst=np.array([1]), num_nodes=9)
    assert read_npz(tmp_path / "c.npz").num_nodes == {HOMO_NTYPE: 9}


def _save_npz(tmp_path, name, **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "arrays, fragment",
    [
        ({"indptr": np.array([0, 1]), "x": np.zeros(2)}, "unknown key 'x'"),
        ({"num_nodes": 3}, "has no edges"),
        ({"src": np.array([0, 1])}, "no 'dst'"),
        ({"src": np.array([0, 1]), "dst": np.array([1])}, "'src' has 2 entries"),
        ({"src": np.array([0, -1]), "dst": np.array([1, 0])}, "negative"),
        ({"src": np.array([0, 1]), "dst": np.array([1, 7]), "num_nodes": 3}, "out of range"),
        ({"src": np.array([0.0, 1.0]), "dst": np.array([1, 0])}, "integer node ids"),
        ({"src": np.array([0]), "dst": np.array([1]), "indptr": np.array([0])}, "both COO"),
        ({"indptr": np.array([0, 2, 1, 3]), "indices": np.array([0, 1, 2])}, "must not decrease"),
        ({"indptr": np.array([0, 1, 2]), "indices": np.array([0, 1, 2])}, "ends at 2"),
        ({"indptr": np.array([1, 2]), "indices": np.array([0])}, "start at 0"),
        (
            {"indptr": np.array([0, 1, 2]), "indices": np.array([0, 1]), "num_nodes": 5},
            "num_nodes + 1",
        ),
        (
            {"src": np.array([0]), "dst": np.array([1]), "num_nodes": 3, "node:f": np.zeros(2)},
            "node feature _N/f has 2 rows",
        ),
        ({"src": np.array([0]), "dst": np.array([1]), "edge:w": np.zeros(3)}, "edge feature"),
        ({"src": np.array([0]), "dst": np.array([1]), "node:": np.zeros(2)}, "empty feature"),
        ({"src": np.array([0]), "dst": np.array([1]), "num_nodes": -2}, "num_nodes"),
    ],
)
def test_npz_bad_inputs_name_the_file(tmp_path, arrays, fragment):
    path = _save_npz(tmp_path, "bad_graph.npz", **arrays)
    with raises_input(path) as info:
        read_npz(path)
    assert fragment in str(info.value)


def test_npz_unknown_key_says_what_is_allowed(tmp_path):
    path = _save_npz(tmp_path, "g.npz", src=np.array([0]), dst=np.array([1]), feat=np.zeros(2))
    with raises_input(path) as info:
        read_npz(path)
    assert "node:NAME" in str(info.value) and "'feat'" in str(info.value)


def test_npz_missing_and_not_npz(tmp_path):
    with raises_input(tmp_path / "nope.npz") as info:
        read_npz(tmp_path / "nope.npz")
    assert "no such file" in str(info.value)
    text = tmp_path / "text.npz"
    text.write_text("0 1\n")
    with raises_input(text) as info:
        read_npz(text)
    assert "not a NumPy .npz" in str(info.value)
    single = tmp_path / "single.npz"
    with open(single, "wb") as fh:
        np.save(fh, np.arange(3))
    with raises_input(single) as info:
        read_npz(single)
    assert "single .npy" in str(info.value)


def test_write_npz_refuses_hetero(tmp_path):
    g = generate_graph(30, avg_degree=2, hetero=True)
    with raises_input(tmp_path / "h.npz"):
        write_npz(g, tmp_path / "h.npz")
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- text


@pytest.mark.parametrize("delimiter", [",", "\t", " "])
def test_text_round_trip_by_delimiter(tmp_path, delimiter):
    g = generate_graph(300, avg_degree=4, seed=5)
    src, dst = g.edges[HOMO_ETYPE]
    path = tmp_path / "edges.txt"
    write_edge_list(g, path, delimiter=delimiter)
    back = read_edge_list(path)  # delimiter auto-detected
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][0], src)
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][1], dst)
    assert back.num_nodes[HOMO_NTYPE] == max(src.max(), dst.max()) + 1
    explicit = read_edge_list(path, delimiter=delimiter, num_nodes=300)
    assert explicit.num_nodes == {HOMO_NTYPE: 300}


def test_format_edge_lines_digits():
    out = format_edge_lines(np.array([0, 9, 10, 123456789012]), np.array([100, 0, 99, 1]), ",")
    assert out == b"0,100\n9,0\n10,99\n123456789012,1\n"
    assert format_edge_lines(np.array([], np.int64), np.array([], np.int64)) == b""


def test_text_comments_blank_lines_header_weights(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text(
        "# a comment\n\nsource, target, weight\n0, 1, 0.5\n# mid comment\n1,2,1.5  # trailing\n"
        "\n2,0,-2e-3\r\n"
    )
    g = read_edge_list(path)
    np.testing.assert_array_equal(g.edges[HOMO_ETYPE][0], [0, 1, 2])
    np.testing.assert_array_equal(g.edges[HOMO_ETYPE][1], [1, 2, 0])
    np.testing.assert_array_equal(g.edata[HOMO_ETYPE]["weight"], [0.5, 1.5, -2e-3])
    assert g.num_nodes == {HOMO_NTYPE: 3}


def test_text_header_then_other_delimiter(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("src dst\n0,1\n1,2\n")
    g = read_edge_list(path)
    np.testing.assert_array_equal(g.edges[HOMO_ETYPE][1], [1, 2])


def test_text_negative_num_nodes_is_an_option_error(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n")
    with pytest.raises(PartitionOptionError):
        read_edge_list(tmp_path / "e.txt", num_nodes=-1)


def test_text_weights_round_trip_exactly(tmp_path):
    g = small_graph()
    src, dst = g.edges[HOMO_ETYPE]
    w = g.edata[HOMO_ETYPE]["weight"]
    path = tmp_path / "g.tsv"
    path.write_text(
        "".join(f"{s}\t{d}\t{float(x)!r}\n" for s, d, x in zip(src, dst, w, strict=True))
    )
    back = read_edge_list(path, num_nodes=6)
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][0], src)
    np.testing.assert_array_equal(back.edata[HOMO_ETYPE]["weight"], w)


def test_text_extra_non_numeric_columns_are_ignored(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("0 1 friend 2020\n1 2 foe 2021\n")
    g = read_edge_list(path)
    assert g.total_edges == 2 and not g.edata[HOMO_ETYPE]


def test_text_node_data_and_round_trip(tmp_path):
    g = small_graph(with_weight=False)
    write_edge_list(g, tmp_path / "g.el")
    paths = {}
    for name, arr in g.ndata[HOMO_NTYPE].items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], arr)
    assert_same_graph(g, read_graph(tmp_path / "g.el", node_data=paths))


def test_text_node_data_rows_extend_node_count(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n")
    np.save(tmp_path / "f.npy", np.zeros((5, 3)))
    g = read_edge_list(tmp_path / "e.txt", node_data={"f": str(tmp_path / "f.npy")})
    assert g.num_nodes == {HOMO_NTYPE: 5}


def test_text_empty_file(tmp_path):
    (tmp_path / "e.txt").write_text("# nothing here\n\n")
    g = read_edge_list(tmp_path / "e.txt", num_nodes=3)
    assert g.total_edges == 0 and g.num_nodes == {HOMO_NTYPE: 3}


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        ("0 1\n1 2\n2 x\n3 4\n", 3, "'2 x'"),
        ("# c\n0 1\n\n1\n", 4, "found 1 field"),
        ("src dst\n0 1\n1.5 2\n", 3, "'1.5' is not an integer"),
        ("0,1,0.5\n1,2,heavy\n", 2, "weight 'heavy'"),
        ("0 1\n1 -4\n", 2, "negative"),
        ("a b\nc d\n", 2, "taken as a header"),
        ("0 1\n99999999999999999999 2\n", 2, "not an integer"),
    ],
)
def test_text_bad_line_reports_file_line_and_text(tmp_path, content, line, fragment):
    path = tmp_path / "broken_edges.txt"
    path.write_text(content)
    with raises_input(path, line=line) as info:
        read_edge_list(path)
    message = str(info.value) + " " + (info.value.hint or "")
    assert fragment in message


def test_text_id_beyond_num_nodes_names_line(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("0,1\n1,2\n# x\n5,0\n")
    with raises_input(path, line=4) as info:
        read_edge_list(path, num_nodes=3)
    assert "'5,0'" in str(info.value)


def test_text_bad_line_found_in_a_big_file(tmp_path):
    n = 200_000
    src = np.arange(n) % 1000
    lines = bytearray(format_edge_lines(src, src + 1))
    path = tmp_path / "big.txt"
    path.write_bytes(bytes(lines) + b"7 seven\n")
    with raises_input(path, line=n + 1):
        read_edge_list(path)


def test_text_node_data_errors_name_the_npy(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    np.save(tmp_path / "short.npy", np.zeros(2))
    with raises_input(tmp_path / "short.npy") as info:
        read_edge_list(tmp_path / "e.txt", node_data={"f": str(tmp_path / "short.npy")})
    assert "2 rows" in str(info.value)
    with raises_input(tmp_path / "gone.npy"):
        read_edge_list(tmp_path / "e.txt", node_data={"f": str(tmp_path / "gone.npy")})
    (tmp_path / "junk.npy").write_text("nope")
    with raises_input(tmp_path / "junk.npy"):
        read_edge_list(tmp_path / "e.txt", node_data={"f": str(tmp_path / "junk.npy")})


def test_text_missing_file_and_bad_delimiter(tmp_path):
    with raises_input(tmp_path / "none.txt") as info:
        read_edge_list(tmp_path / "none.txt")
    assert "no such file" in str(info.value)
    (tmp_path / "e.txt").write_text("0 1\n")
    with raises_input(tmp_path / "e.txt"):
        read_edge_list(tmp_path / "e.txt", delimiter="7")


# ----------------------------------------------------------------------------- chunked


@pytest.mark.parametrize("num_chunks", [1, 3])
def test_chunked_round_trip_homogeneous(tmp_path, num_chunks):
    g = small_graph()
    meta = write_chunked(g, tmp_path / "out", "small", num_chunks=num_chunks)
    assert meta == (tmp_path / "out" / "metadata.json").resolve()
    assert_same_graph(g, read_chunked(tmp_path / "out"))
    assert_same_graph(g, read_chunked(meta))
    data = json.loads(meta.read_text())
    assert data["graph_name"] == "small"
    assert data["num_nodes_per_chunk"] == [[6]] if num_chunks == 1 else [[2, 2, 2]]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # temp folders are gone


def test_chunked_round_trip_heterogeneous(tmp_path):
    g = generate_graph(400, avg_degree=6, hetero=True, seed=9)
    g.edata[("paper", "cites", "paper")]["year"] = np.arange(
        g.num_edges(("paper", "cites", "paper")), dtype=np.int32
    )
    write_chunked(g, tmp_path / "mag", "mag", num_chunks=2)
    back = read_graph(tmp_path / "mag")
    assert_same_graph(g, back)
    meta = json.loads((tmp_path / "mag" / "metadata.json").read_text())
    assert meta["edge_type"] == [
        "author:writes:paper",
        "paper:written-by:author",
        "paper:cites:paper",
    ]
    assert meta["edges"]["paper:cites:paper"]["format"] == {"name": "csv", "delimiter": " "}


def test_chunked_reads_dgl_style_folder(tmp_path):
    """A hand-made folder as DGL documents it: absolute and relative paths, empty chunk."""
    (tmp_path / "edges").mkdir()
    (tmp_path / "edges" / "a.csv").write_text("0 1\n1 0\n")
    (tmp_path / "edges" / "b.csv").write_text("")
    np.save(tmp_path / "f0.npy", np.array([[1.0], [2.0]]))
    np.save(tmp_path / "f1.npy", np.array([[3.0]]))
    meta = {
        "graph_name": "toy",
        "node_type": ["user"],
        "num_nodes_per_chunk": [[2, 1]],
        "edge_type": ["user:follows:user"],
        "num_edges_per_chunk": [[2, 0]],
        "edges": {
            "user:follows:user": {
                "format": {"name": "csv", "delimiter": " "},
                "data": ["edges/a.csv", str(tmp_path / "edges" / "b.csv")],
            }
        },
        "node_data": {
            "user": {"feat": {"format": {"name": "numpy"}, "data": ["f0.npy", "f1.npy"]}}
        },
        "edge_data": {},
    }
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    g = read_chunked(tmp_path)
    assert g.num_nodes == {"user": 3}
    np.testing.assert_array_equal(g.ndata["user"]["feat"].ravel(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(g.edges[("user", "follows", "user")][0], [0, 1])


def _chunked_copy(tmp_path):
    g = generate_graph(60, avg_degree=4, hetero=True, seed=1)
    meta_path = write_chunked(g, tmp_path / "c", "c", num_chunks=2)
    return meta_path, json.loads(meta_path.read_text())


def _rewrite(meta_path, meta):
    meta_path.write_text(json.dumps(meta))


def test_chunked_missing_key_names_key_and_file(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    del meta["num_edges_per_chunk"]
    _rewrite(meta_path, meta)
    with raises_input(meta_path) as info:
        read_chunked(meta_path)
    assert "'num_edges_per_chunk'" in str(info.value)


def test_chunked_chunk_count_mismatch(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    meta["edges"]["paper:cites:paper"]["data"].pop()
    _rewrite(meta_path, meta)
    with raises_input(meta_path) as info:
        read_chunked(meta_path)
    assert "1 data files" in str(info.value)


def test_chunked_edge_count_mismatch_names_chunk(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    meta["num_edges_per_chunk"][2][0] += 1
    _rewrite(meta_path, meta)
    chunk = meta["edges"]["paper:cites:paper"]["data"][0]
    with raises_input(chunk) as info:
        read_chunked(meta_path)
    assert "num_edges_per_chunk" in str(info.value)


def test_chunked_unknown_types(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    meta["edge_type"][0] = "person:writes:paper"
    _rewrite(meta_path, meta)
    with raises_input(meta_path) as info:
        read_chunked(meta_path)
    assert "unknown source node type 'person'" in str(info.value)

    meta_path, meta = _chunked_copy(tmp_path / "again")
    meta["node_data"]["venue"] = meta["node_data"].pop("author")
    _rewrite(meta_path, meta)
    with raises_input(meta_path) as info:
        read_chunked(meta_path)
    assert "unknown type 'venue'" in str(info.value)

    meta_path, meta = _chunked_copy(tmp_path / "third")
    meta["edges"]["paper:likes:paper"] = meta["edges"]["paper:cites:paper"]
    _rewrite(meta_path, meta)
    with raises_input(meta_path) as info:
        read_chunked(meta_path)
    assert "'paper:likes:paper'" in str(info.value)


def test_chunked_missing_chunk_file(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    victim = meta_path.parent / meta["node_data"]["paper"]["feat"]["data"][1]
    victim.unlink()
    with raises_input(victim) as info:
        read_chunked(meta_path.parent)
    assert "missing" in str(info.value)


def test_chunked_bad_edge_line_names_file_and_line(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    chunk = meta_path.parent / meta["edges"]["author:writes:paper"]["data"][1]
    lines = chunk.read_text().splitlines()
    lines[2] = "3 oops"
    chunk.write_text("\n".join(lines) + "\n")
    with raises_input(chunk, line=3) as info:
        read_chunked(meta_path)
    assert "'3 oops'" in str(info.value)


def test_chunked_id_out_of_range_names_file_and_line(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    chunk = meta_path.parent / meta["edges"]["author:writes:paper"]["data"][0]
    lines = chunk.read_text().splitlines()
    lines[1] = "9999 0"
    chunk.write_text("\n".join(lines) + "\n")
    with raises_input(chunk, line=2) as info:
        read_chunked(meta_path)
    assert "author nodes" in str(info.value)


def test_chunked_feature_rows_mismatch_and_bad_json(tmp_path):
    meta_path, meta = _chunked_copy(tmp_path)
    feat_file = meta_path.parent / meta["node_data"]["author"]["feat"]["data"][0]
    np.save(feat_file, np.zeros((1, 32), dtype=np.float32))
    with raises_input(feat_file) as info:
        read_chunked(meta_path)
    assert "rows" in str(info.value)
    meta_path.write_text('{"graph_name": "x",\n "node_type": [,]}')
    with raises_input(meta_path, line=2):
        read_chunked(meta_path)


def test_chunked_missing_metadata(tmp_path):
    with raises_input(tmp_path) as info:
        read_chunked(tmp_path)
    assert "metadata.json" in str(info.value)


def test_write_chunked_existing_folder(tmp_path):
    g = small_graph()
    write_chunked(g, tmp_path / "out", "a")
    with pytest.raises(OutputExistsError):
        write_chunked(g, tmp_path / "out", "a")
    g2 = generate_graph(20, avg_degree=2)
    write_chunked(g2, tmp_path / "out", "b", num_chunks=1, overwrite=True)
    assert_same_graph(g2, read_chunked(tmp_path / "out"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(PartitionOptionError):
        write_chunked(g2, tmp_path / "other", "b", num_chunks=0)
    (tmp_path / "empty").mkdir()
    write_chunked(g2, tmp_path / "empty", "b")  # an empty folder may be filled
    assert (tmp_path / "empty" / "metadata.json").is_file()


# ----------------------------------------------------------------------------- read_graph


def test_read_graph_detects_formats(tmp_path):
    g = small_graph(with_weight=False)
    write_npz(g, tmp_path / "g.npz")
    write_chunked(g, tmp_path / "chunks", "g")
    for suffix in (".csv", ".tsv", ".txt", ".edges", ".el"):
        write_edge_list(g, tmp_path / f"g{suffix}")
        assert detect_format(tmp_path / f"g{suffix}") == "text"
        assert read_graph(tmp_path / f"g{suffix}", num_nodes=6).total_edges == 6
    assert detect_format(tmp_path / "g.npz") == "npz"
    assert detect_format(tmp_path / "chunks") == "chunked"
    assert detect_format(tmp_path / "chunks" / "metadata.json") == "chunked"
    assert_same_graph(g, read_graph(tmp_path / "g.npz"))
    assert_same_graph(g, read_graph(tmp_path / "chunks"))
    write_edge_list(g, tmp_path / "g.dat")
    assert read_graph(tmp_path / "g.dat", fmt="text").total_edges == 6


def test_read_graph_errors(tmp_path):
    with raises_input(tmp_path / "missing.npz") as info:
        read_graph(tmp_path / "missing.npz")
    assert "no such file" in str(info.value)
    (tmp_path / "g.h5").write_text("x")  # a format dglctl does not read
    with raises_input(tmp_path / "g.h5") as info:
        read_graph(tmp_path / "g.h5")
    assert "npz" in info.value.hint and "chunked" in info.value.hint and ".csv" in info.value.hint
    with pytest.raises(PartitionOptionError):
        read_graph(tmp_path / "g.h5", fmt="hdf5")
    write_npz(small_graph(), tmp_path / "g.npz")
    with pytest.raises(PartitionOptionError):
        read_graph(tmp_path / "g.npz", delimiter=",")
