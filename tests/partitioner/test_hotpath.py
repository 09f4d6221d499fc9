"""The threaded hot path (symmetrize, presort, relabel) writes the same bytes as the serial one."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from partitioner import memory, parallel, partition_graph, symmetric
from partitioner.graph import Graph
from partitioner.symmetric import symmetric_csr
from testing.graphs import community_graph, hetero_graph

pytestmark = pytest.mark.unit


def _serial(monkeypatch):
    monkeypatch.setattr(parallel, "_THREADS", 1)


def _threaded(monkeypatch):
    """Split work over two threads even for tiny inputs (thresholds and chunks shrunk)."""
    monkeypatch.setattr(parallel, "_THREADS", 2)
    monkeypatch.setattr(parallel, "_MIN_CHUNK", 8)
    monkeypatch.setattr(symmetric, "_CHUNK", 64)


def _reference_csr(src, dst, n):
    """Sorted, duplicate- and loop-free symmetric adjacency, the obvious numpy way."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    keep = src != dst
    rows = np.concatenate([src[keep], dst[keep]])
    cols = np.concatenate([dst[keep], src[keep]])
    pairs = np.unique(rows * n + cols)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(pairs // n, minlength=n))])
    return indptr, pairs % n


def _cases():
    rng = np.random.default_rng(3)
    for n, m, dtype in [(1, 50, np.int64), (2, 40, np.int32), (300, 5000, np.int64),
                        (1000, 20000, np.int32), (700, 9000, np.uint32), (50, 3000, np.uint16)]:
        src = rng.integers(0, n, m).astype(dtype)
        dst = rng.integers(0, n, m).astype(dtype)
        src[: m // 10] = dst[: m // 10]  # self loops
        src = np.concatenate([src, dst[: m // 4]])  # reversed duplicates
        dst = np.concatenate([dst, src[: m // 4]])
        yield src, dst, n
    # Skewed: most edges touch a few low ids, then a few high ones.
    n = 5000
    low = (rng.random(30000) ** 4 * n).astype(np.int64)
    yield low, rng.integers(0, n, 30000), n
    yield np.full(4000, n - 1), rng.integers(0, n, 4000), n


@pytest.mark.parametrize("case", range(8))
def test_symmetric_csr_threaded_equals_serial_and_reference(monkeypatch, case):
    src, dst, n = list(_cases())[case]
    _serial(monkeypatch)
    serial = symmetric_csr(src, dst, n)
    _threaded(monkeypatch)
    threaded = symmetric_csr(src, dst, n)
    ref_ptr, ref_idx = _reference_csr(src, dst, n)
    for indptr, indices in (serial, threaded):
        assert indptr.dtype == np.int32 and indices.dtype == np.int32
        assert np.array_equal(indptr, ref_ptr) and np.array_equal(indices, ref_idx)


@pytest.mark.parametrize("bad", [-1, 10])
def test_symmetric_csr_threaded_range_checks(monkeypatch, bad):
    _threaded(monkeypatch)
    src = np.arange(1000) % 10
    dst = src[::-1].copy()
    dst[777] = bad
    with pytest.raises(symmetric.PartitionInputError, match=str(bad)):
        symmetric_csr(src, dst, 10)


def _messy_graph(seed=0):
    rng = np.random.default_rng(seed)
    n = 1500
    src, dst = rng.integers(0, n, 12000), rng.integers(0, n, 12000)
    src[:300] = dst[:300]
    ndata = {"train_mask": rng.random(n) < 0.4, "feat": rng.standard_normal((n, 3)).astype("f4")}
    return Graph.homogeneous(src, dst, n, ndata=ndata, edata={"w": rng.random(12000)})


@pytest.mark.parametrize("make", [community_graph, hetero_graph, _messy_graph])
@pytest.mark.parametrize("options", [{"halo_hops": 1, "balance_edges": True},
                                     {"halo_hops": 2, "trainers_per_machine": 2}])
def test_partition_threaded_writes_the_same_bytes(tmp_path, monkeypatch, make, options):
    graph = make()
    _serial(monkeypatch)
    serial = partition_graph(graph, "g", 3, tmp_path / "serial", **options)
    _threaded(monkeypatch)
    threaded = partition_graph(graph, "g", 3, tmp_path / "threaded", **options)
    assert serial["files"] == threaded["files"]  # size and checksum of every file
    assert serial["node_map"] == threaded["node_map"]
    assert serial["edge_map"] == threaded["edge_map"]


def test_run_all_returns_in_order_and_waits_before_raising():
    finished = threading.Event()

    def slow():
        finished.wait(0.05)
        finished.set()
        return "slow"

    assert parallel.run_all([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]

    def fail():
        raise ValueError("first job failed")

    finished.clear()
    with pytest.raises(ValueError, match="first job"):
        parallel.run_all([fail, slow])
    assert finished.is_set()  # the other job had finished when the error came out


def test_sparsetools_loads_directly_or_falls_back_to_scipy(monkeypatch):
    direct = parallel._load_sparsetools()
    assert direct is None or hasattr(direct, "coo_tocsr")

    def broken():
        raise ImportError("no luck")

    monkeypatch.setattr(parallel, "_kernels", None)
    monkeypatch.setattr(parallel, "_load_sparsetools", broken)
    monkeypatch.delitem(sys.modules, "scipy.sparse._sparsetools", raising=False)
    kernels = parallel.sparsetools()
    assert hasattr(kernels, "coo_tocsr")
    assert parallel.sparsetools() is kernels  # loaded once


def test_retained_heap_nests_and_prefault_is_safe_anywhere():
    memory.prefault(1 << 20)  # outside the block: nothing to keep the pages for, a no-op
    with memory.retained_heap():
        with memory.retained_heap():
            memory.prefault(4 << 20)
            a = np.ones(1 << 20)
        memory.prefault(0)
        del a
    memory.release_free_memory()


def test_failure_beside_the_workers_leaves_nothing(tmp_path, monkeypatch):
    import partitioner.pipeline as pipeline

    def boom(*args, **kwargs):
        raise RuntimeError("symmetrize failed")

    monkeypatch.setattr(pipeline, "symmetric_csr", boom)
    with pytest.raises(RuntimeError, match="symmetrize failed"):
        partition_graph(community_graph(n=200), "g", 2, tmp_path / "o")
    assert not (tmp_path / "o").exists()
    assert list(tmp_path.iterdir()) == []


def test_single_edge_type_between_two_node_types(tmp_path):
    # authors 0..4 write papers 0..2: the papers are homogeneous ids 5..7, not 0..2.
    graph = Graph(
        num_nodes={"author": 5, "paper": 3},
        edges={("author", "writes", "paper"): (np.array([0, 1, 2, 3, 4]), np.array([0, 0, 1, 2, 2]))},
    )
    from partitioner.pipeline import _homogeneous_edges

    src, dst = _homogeneous_edges(graph)
    assert src.tolist() == [0, 1, 2, 3, 4] and dst.tolist() == [5, 5, 6, 7, 7]
    cfg = partition_graph(graph, "g", 2, tmp_path / "o", balance_train=False)
    assert cfg["num_nodes"] == 8


def test_out_of_range_ids_are_rejected_before_any_kernel(tmp_path):
    graph = Graph(
        num_nodes={"author": 5, "paper": 3},
        edges={("author", "writes", "paper"): (np.array([0, 1, 4]), np.array([0, 2, 3]))},
    )
    for method in ("metis", "random"):
        with pytest.raises(symmetric.PartitionInputError, match="out of range|num_nodes"):
            partition_graph(graph, "g", 2, tmp_path / method, method=method)
        assert not (tmp_path / method).exists()
