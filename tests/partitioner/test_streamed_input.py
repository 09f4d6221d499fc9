"""Inputs parsed a chunk at a time: :class:`partitioner.spill.Column`, the text parser's chunks,
and the chunked and OGB readers streaming into a spill folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from partitioner import spill
from partitioner.errors import PartitionInputError
from partitioner.generate import generate_graph
from partitioner.memory import mapping_of
from partitioner.readers import parsed_bytes_estimate, read_chunked, read_graph, text, write_chunked
from partitioner.spill import Column, SpillFolder
from testing.graphs import community_graph

pytestmark = pytest.mark.unit


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 50 lines, columns moved to a file past 1 KiB: a test graph streams."""
    monkeypatch.setattr(text, "CHUNK_ROWS", 50)
    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 1024)


def test_a_column_stays_in_memory_while_small_and_moves_to_a_file_past_the_threshold(
        tmp_path, monkeypatch):
    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 100)
    folder = SpillFolder(tmp_path / "s")
    small = Column(np.int64, folder=folder)
    small.append(np.arange(5))
    small.append(np.arange(5, 10, dtype=np.int32))  # cast to the column's dtype
    whole = small.finish()
    assert mapping_of(whole) is None and whole.dtype == np.int64
    np.testing.assert_array_equal(whole, np.arange(10))
    assert not (tmp_path / "s").exists()  # nothing was written

    rows = Column(np.float32, (3,), folder)
    parts = [np.full((n, 3), i, np.float32) for i, n in enumerate((4, 7, 0, 9))]
    for part in parts:
        rows.append(part)
    mapped = rows.finish()
    assert mapping_of(mapped) is not None and mapped.shape == (20, 3)
    np.testing.assert_array_equal(mapped, np.concatenate(parts))
    assert [p.suffix for p in (tmp_path / "s").iterdir()] == [".bin"]
    with pytest.raises(ValueError, match="rows"):
        Column(np.float32, (3,), folder).append(np.zeros((2, 4), np.float32))
    assert Column(np.int64).finish().shape == (0,)


def test_a_discarded_column_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 8)
    column = Column(np.int64, folder=SpillFolder(tmp_path / "s"))
    column.append(np.arange(100))
    assert len(list((tmp_path / "s").iterdir())) == 1
    column.discard()
    assert list((tmp_path / "s").iterdir()) == []


def test_the_text_parser_in_chunks_gives_what_one_pass_gives(tmp_path, small_chunks):
    rng = np.random.default_rng(3)
    edges = rng.integers(0, 400, (333, 2))
    weight = rng.random(333)
    lines = ["# a comment", "src,dst,w"]
    for i, ((s, d), w) in enumerate(zip(edges, weight, strict=True)):
        lines.append(f"{s},{d},{float(w)!r}")
        if i % 40 == 0:
            lines.extend(["", "# between chunks"])  # not rows: chunks count data lines
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    folder = SpillFolder(tmp_path / "s")
    src, dst, w, layout = text.parse_edge_columns(str(tmp_path / "e.csv"), spill=folder)
    assert layout.header == ("src", "dst", "w")
    for got, want in ((src, edges[:, 0]), (dst, edges[:, 1]), (w, weight)):
        assert mapping_of(got) is not None
        np.testing.assert_array_equal(got, want)
    memory = text.parse_edge_columns(str(tmp_path / "e.csv"))
    assert all(mapping_of(a) is None for a in memory[:3])
    np.testing.assert_array_equal(memory[0], edges[:, 0])


def test_a_file_of_exactly_whole_chunks_and_an_empty_file(tmp_path, small_chunks):
    (tmp_path / "e.txt").write_text("".join(f"{i} {i + 1}\n" for i in range(100)))
    src, dst, _, _ = text.parse_edge_columns(str(tmp_path / "e.txt"))
    np.testing.assert_array_equal(src, np.arange(100))
    (tmp_path / "empty.txt").write_text("")
    src, dst, weight, _ = text.parse_edge_columns(str(tmp_path / "empty.txt"))
    assert src.shape == dst.shape == (0,) and weight is None


def test_an_id_out_of_range_in_a_later_chunk_of_a_chunked_input_names_its_line(
        tmp_path, small_chunks):
    g = community_graph(n=300)
    meta_path = write_chunked(g, tmp_path / "c", "c", num_chunks=2)
    meta = json.loads(meta_path.read_text())
    chunk = meta_path.parent / meta["edges"]["_N:_E:_N"]["data"][1]
    lines = chunk.read_text().splitlines()
    assert len(lines) > 3 * 50  # the bad line is in the parser's fourth chunk
    lines[170] = "7 300"
    chunk.write_text("\n".join(lines) + "\n")
    with pytest.raises(PartitionInputError) as info:
        read_chunked(meta_path, spill=SpillFolder(tmp_path / "s"))
    assert info.value.path == str(chunk) and info.value.line == 171
    assert "destination id 300 is out of range" in str(info.value)
    assert not list((tmp_path / "s").glob("*"))  # the columns were discarded


def test_a_chunk_with_more_edges_than_its_metadata_says_is_refused(tmp_path, small_chunks):
    g = community_graph(n=300)
    meta_path = write_chunked(g, tmp_path / "c", "c", num_chunks=2)
    meta = json.loads(meta_path.read_text())
    meta["num_edges_per_chunk"][0][0] -= 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(PartitionInputError, match="more than"):
        read_chunked(meta_path)


def test_a_chunked_input_streams_edges_and_features_into_the_spill_folder(tmp_path,
                                                                          small_chunks):
    g = generate_graph(400, avg_degree=6, hetero=True, seed=9)
    cites = ("paper", "cites", "paper")
    g.edata[cites]["year"] = np.arange(g.num_edges(cites), dtype=np.int32)
    write_chunked(g, tmp_path / "mag", "mag", num_chunks=3)
    in_memory = read_graph(tmp_path / "mag")
    streamed = read_graph(tmp_path / "mag", spill=SpillFolder(tmp_path / "s"))
    for kind in ("edges", "ndata", "edata"):
        got, want = streamed.arrays()[kind], in_memory.arrays()[kind]
        assert len(got) == len(want) > 0
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
    assert all(mapping_of(a) is not None for a in streamed.arrays()["edges"])
    assert any(mapping_of(a) is not None for a in streamed.arrays()["ndata"])


def test_the_parsed_size_estimate_counts_what_a_reader_parses(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n" * 1000)
    assert parsed_bytes_estimate(tmp_path / "e.txt") == 6000  # 1.5 bytes per byte of text
    import gzip

    with gzip.open(tmp_path / "e.txt.gz", "wt") as fh:
        fh.write("0 1\n" * 1000)
    packed = (tmp_path / "e.txt.gz").stat().st_size
    assert parsed_bytes_estimate(tmp_path / "e.txt.gz") == int(packed * 4 * 1.5)
    write_chunked(community_graph(n=100), tmp_path / "c", "c", num_chunks=2)
    files = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert parsed_bytes_estimate(tmp_path / "c") == int(sum(p.stat().st_size for p in files)
                                                        * 1.5)
    from partitioner.readers import write_npz

    write_npz(community_graph(n=100), tmp_path / "g.npz")
    assert parsed_bytes_estimate(tmp_path / "g.npz") == 0  # mapped, not parsed
