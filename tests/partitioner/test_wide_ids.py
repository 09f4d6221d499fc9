"""Past 2**31 adjacency entries the symmetric graph's row pointers are 64-bit, KaMinPar takes
them and METIS refuses them by name. Graphs that big do not fit a test, so the 32-bit limit is
lowered: the same code paths run on a small graph and must give what the 32-bit ones give."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import PartitionOptionError, symmetric
from partitioner.methods import checks, kaminpar, metis
from partitioner.symmetric import symmetric_csr
from tests.conftest import community_graph
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
    monkeypatch.setattr(kaminpar, "_OFFSET_32_MAX", 0)  # 64-bit byte offsets in the file
    wide = kaminpar.assign(indptr.astype(np.int64), indices, 3, seed=5, threads=1)
    np.testing.assert_array_equal(wide, narrow)
    assert set(np.unique(wide)) == {0, 1, 2}
