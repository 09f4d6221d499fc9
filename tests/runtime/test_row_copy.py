"""The compiled row copy used by every feature pull (server gather, local rows, placing
received rows): equal to numpy's fancy indexing for any dtype and row shape."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.sampling import kernels

pytestmark = pytest.mark.unit

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.float16, bool, np.int8, np.complex128]
SHAPES = [(300,), (300, 7), (300, 3, 5), (300, 0)]


def _rows(rng, dtype, shape):
    return (rng.random(shape) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_gather_scatter_and_both_equal_numpy(dtype, shape):
    rng = np.random.default_rng(len(shape))
    src = _rows(rng, dtype, shape)
    ids = rng.integers(0, len(src), 1000)  # repeats, any order
    np.testing.assert_array_equal(kernels.gather_rows(src, ids), src[ids])

    sel = rng.permutation(len(src))[:200]
    got, want = np.zeros_like(src), np.zeros_like(src)
    kernels.copy_rows(src[:200], got, dst_ids=sel)
    want[sel] = src[:200]
    np.testing.assert_array_equal(got, want)

    got, want = np.zeros_like(src), np.zeros_like(src)
    kernels.copy_rows(src, got, src_ids=ids[:200], dst_ids=sel)
    want[sel] = src[ids[:200]]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(0,), (0, 4), (0, 0), (5, 0)])
def test_empty_tables_and_rows(shape):
    """A machine may own no node of a type: its tables have no rows."""
    src = np.zeros(shape, np.float32)
    got = kernels.gather_rows(src, np.zeros(0, np.int64))
    assert got.shape == (0, *shape[1:])
    if shape[0]:
        assert kernels.gather_rows(src, np.array([4, 0])).shape == (2, *shape[1:])


def test_read_only_source_as_received_off_the_wire():
    src = np.frombuffer(np.arange(40, dtype=np.float32).tobytes(), np.float32).reshape(10, 4)
    out = np.zeros((10, 4), np.float32)
    kernels.copy_rows(src, out, dst_ids=np.arange(10)[::-1].copy())
    np.testing.assert_array_equal(out, src[::-1])


def test_non_contiguous_or_mixed_dtypes_take_numpys_way():
    src = np.arange(60, dtype=np.float64).reshape(10, 6)[:, ::2]  # strided rows
    ids = np.array([3, 1, 3])
    np.testing.assert_array_equal(kernels.gather_rows(src, ids), src[ids])
    out = np.zeros((3, 3), np.float32)
    kernels.copy_rows(src, out, src_ids=ids)
    np.testing.assert_array_equal(out, src[ids].astype(np.float32))


@pytest.mark.parametrize("bad", [-1, 10, 1 << 40])
def test_ids_outside_the_rows_are_an_index_error(bad):
    src = np.zeros((10, 4), np.float32)
    with pytest.raises(IndexError, match=rf"row id {bad} is outside the 10 rows read from"):
        kernels.gather_rows(src, np.array([0, 5, bad, 2]))
    with pytest.raises(IndexError, match=rf"row id {bad} is outside the 10 rows written to"):
        kernels.copy_rows(src[:2], np.zeros((10, 4), np.float32), dst_ids=np.array([1, bad]))


def test_row_counts_must_agree():
    with pytest.raises(ValueError, match="3 source rows for 2 destination rows"):
        kernels.copy_rows(np.zeros((3, 2)), np.zeros((2, 2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_copy_rows_in_range_fills_only_the_rows_of_its_range(dtype, shape):
    """A pull's local rows read in place: positions whose id is in [lo, lo + len(src)) get
    ``src[id - lo]``, every other row of the destination is left as it was."""
    rng = np.random.default_rng(3)
    src = _rows(rng, dtype, shape)
    lo = 1000
    ids = rng.integers(0, 3000, 800)  # about a third inside [1000, 1300)
    before = _rows(rng, dtype, (800, *shape[1:]))
    got = before.copy()
    kernels.copy_rows_in_range(src, got, ids, lo)
    mine = (ids >= lo) & (ids < lo + len(src))
    want = before.copy()
    want[mine] = src[ids[mine] - lo]
    np.testing.assert_array_equal(got, want)
    assert mine.any() and not mine.all()
    strided = np.repeat(src, 2, axis=0)[::2]  # not contiguous: numpy's way, same result
    again = before.copy()
    kernels.copy_rows_in_range(strided, again, ids, lo)
    np.testing.assert_array_equal(again, want)
    with pytest.raises(ValueError, match="800 ids for 799 destination rows"):
        kernels.copy_rows_in_range(src, got[:799], ids, lo)
