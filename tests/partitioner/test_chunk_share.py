"""A rank's share of a chunked graph: with one chunk per rank, rank r reads chunk r of every
edge type and feature and no other (the arrays read chunk files only where sliced); otherwise
the blocks are even and a rank reads the chunks they overlap. The share's numbering (local,
rank-major, homogeneous ids) is consistent, empty blocks included."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.distributed.share import Share
from partitioner.generate import generate_graph
from partitioner.readers import read_chunked, write_chunked
from partitioner.readers.chunk_rows import ChunkRows
from partitioner.readers.chunked import chunked_layout, open_chunked

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    g = generate_graph(500, avg_degree=5, seed=2, hetero=True)
    return g, write_chunked(g, tmp_path_factory.mktemp("in") / "g", "g", 3)


def _read_share(graph, share):
    """What a rank of the distributed partitioner reads of its share."""
    for e in range(len(graph.edges)):
        share.homogeneous_edges(graph, e)
    for t, lo, hi, _ in share.type_slices():
        for arr in graph.ndata[graph.ntypes[t]].values():
            np.asarray(arr[lo:hi])
    for e, et in enumerate(graph.edges):
        a, b = share.edge_range(e)
        for arr in graph.edata[et].values():
            np.asarray(arr[a:b])


def _reads(graph):
    arrays = [a for pair in graph.edges.values() for a in pair]
    arrays += [a for feats in [*graph.ndata.values(), *graph.edata.values()]
               for a in feats.values()]
    assert arrays and all(isinstance(a, ChunkRows) for a in arrays)
    return {tuple(a.read_chunks) for a in arrays}


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_one_chunk_per_rank_reads_its_chunk_only(chunked, rank):
    _, meta = chunked
    layout = chunked_layout(meta)
    graph = open_chunked(layout)
    share = Share.of(graph, rank, 3, node_chunks=layout.node_chunks,
                     edge_chunks=[sizes for _, _, sizes in layout.edges])
    _read_share(graph, share)
    assert _reads(graph) == {(rank,)}


def test_more_ranks_than_chunks_read_what_their_blocks_overlap(chunked):
    _, meta = chunked
    layout = chunked_layout(meta)
    graph = open_chunked(layout)
    share = Share.of(graph, 1, 5, node_chunks=layout.node_chunks)  # 3 chunks: even blocks
    _read_share(graph, share)
    assert _reads(graph) <= {(0,), (1,), (0, 1)}


def test_lazy_arrays_hold_what_the_reader_reads(chunked):
    _, meta = chunked
    whole, lazy = read_chunked(meta), open_chunked(meta)
    for et, (src, dst) in whole.edges.items():
        assert np.array_equal(lazy.edges[et][0][0:len(src)], src)
        assert np.array_equal(lazy.edges[et][1][17:len(dst) - 3], dst[17:-3])
    for t, feats in whole.ndata.items():
        for name, arr in feats.items():
            got = lazy.ndata[t][name]
            assert got.dtype == arr.dtype and got.shape == arr.shape
            assert np.array_equal(np.asarray(got), arr)
            assert got[len(arr):len(arr) + 5].shape == (0, *arr.shape[1:])
    with pytest.raises(TypeError, match="contiguous slices"):
        next(iter(lazy.ndata.values()))["feat"][[1, 2]]


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_local_rank_major_and_homogeneous_ids_agree(chunked, size):
    g, _ = chunked
    shares = [Share.of(g, r, size) for r in range(size)]
    everyone = np.concatenate([s.homogeneous_ids() for s in shares])
    assert np.array_equal(np.sort(everyone), np.arange(g.total_nodes))  # each node once
    for r, s in enumerate(shares):
        ids = s.homogeneous_ids()
        owner, local = s.locate(ids)
        assert np.all(owner == r) and np.array_equal(local, np.arange(s.num_local))
        assert np.array_equal(s.rank_major(ids), s.vtxdist[r] + np.arange(s.num_local))
