"""Past 2**31 adjacency entries the symmetric graph's row pointers are 64-bit, KaMinPar takes
them and METIS refuses them by name. Graphs that big do not fit a test, so the 32-bit limit is
lowered: the same code paths run on a small graph and must give what the 32-bit ones give."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import PartitionOptionError, symmetric
from partitioner.methods import checks, kaminpar, metis, parhip
from partitioner.symmetric import symmetric_csr
from testing.graphs import community_graph
from tests.partitioner.test_hotpath import _reference_csr, _serial, _threaded

pytestmark = pytest.mark.unit


def _edges():
    g = community_graph(n=400)
    ((src, dst),) = g.edges.values()
    return src, dst, 400


@pytest.mark.parametrize("threads", ["serial", "threaded"])
def test_symmetric_csr_goes_64_bit_past_the_limit(monkeypatch, threads):
    (_serial if threads == "serial" else _threaded)(monkeypatch)
    src, dst, n = _edges()
    narrow_ptr, narrow_idx = symmetric_csr(src, dst, n)
    assert narrow_ptr.dtype == np.int32 and narrow_idx.dtype == np.int32
    monkeypatch.setattr(symmetric, "INT32_MAX", len(narrow_idx) - 1)  # just over the limit
    indptr, indices = symmetric_csr(src, dst, n)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    ref_ptr, ref_idx = _reference_csr(src, dst, n)
    np.testing.assert_array_equal(indptr, ref_ptr)
    np.testing.assert_array_equal(indices, ref_idx)


def test_metis_refuses_64_bit_offsets_by_name(monkeypatch):
    src, dst, n = _edges()
    indptr, indices = symmetric_csr(src, dst, n)
    monkeypatch.setattr(checks, "INT32_MAX", len(indices) - 1)
    with pytest.raises(PartitionOptionError) as info:
        metis.assign(indptr.astype(np.int64), indices, 2)
    text = str(info.value)
    assert "METIS" in text and f"{len(indices):,} adjacency entries" in text
    assert "--method kaminpar" in (info.value.hint or "")


def test_kaminpar_takes_64_bit_offsets_and_gives_the_same_parts(monkeypatch):
    pytest.importorskip("kaminpar", reason="the kaminpar package is not installed")
    src, dst, n = _edges()
    indptr, indices = symmetric_csr(src, dst, n)
    narrow = kaminpar.assign(indptr, indices, 3, seed=5, threads=1)
    monkeypatch.setattr(checks, "INT32_MAX", len(indices) - 1)
    monkeypatch.setattr(parhip, "_OFFSET_32_MAX", 0)  # 64-bit byte offsets in the file
    wide = kaminpar.assign(indptr.astype(np.int64), indices, 3, seed=5, threads=1)
    np.testing.assert_array_equal(wide, narrow)
    assert set(np.unique(wide)) == {0, 1, 2}


@pytest.mark.parametrize("threads, final", [("threaded", np.int32), ("serial", np.int64)])
def test_only_a_slice_past_the_limit_sorts_64_bit_positions(monkeypatch, threads, final):
    # One direction per edge: 2 entries each, so the limit can sit between the input's edge
    # count (32-bit passes 1 and 2) and the entry count (64-bit row pointers).
    (_serial if threads == "serial" else _threaded)(monkeypatch)
    rng = np.random.default_rng(7)
    n = 500
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    keep = src < dst
    pairs = np.unique(src[keep] * n + dst[keep])
    src, dst = pairs // n, pairs % n
    monkeypatch.setattr(symmetric, "INT32_MAX", 2 * len(src) - 1)
    seen = []
    original = symmetric._rows_to_csr

    def spy(entries, n_, rows, *rest):
        seen.append(rows.dtype)
        return original(entries, n_, rows, *rest)

    monkeypatch.setattr(symmetric, "_rows_to_csr", spy)
    indptr, indices = symmetric_csr(src, dst, n)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    assert set(seen) == {np.dtype(final)}, seen
    ref_ptr, ref_idx = _reference_csr(src, dst, n)
    np.testing.assert_array_equal(indptr, ref_ptr)
    np.testing.assert_array_equal(indices, ref_idx)
