"""The symmetric graph on disk (``methods.parhip.GraphFile``): built in place by the
symmetrize, byte for byte the file written from memory, read by KaMinPar and METIS, and gone
from the output of a lean run."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner import partition_graph
from partitioner.memory import mapping_of
from partitioner.methods import assign_parts, kaminpar, parhip
from partitioner.methods.parhip import GraphFile
from partitioner.symmetric import symmetric_csr
from testing.graphs import community_graph
from tests.partitioner.test_hotpath import _serial, _threaded
from tests.partitioner.test_wide_ids import _edges

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("threads", ["serial", "threaded"])
@pytest.mark.parametrize("wide", [False, True])
def test_the_file_built_in_place_is_the_file_written_from_memory(tmp_path, monkeypatch,
                                                                 threads, wide):
    (_serial if threads == "serial" else _threaded)(monkeypatch)
    if wide:
        monkeypatch.setattr(parhip, "_OFFSET_32_MAX", 0)  # 64-bit byte offsets
    src, dst, n = _edges()
    indptr, indices = symmetric_csr(src, dst, n)
    GraphFile(tmp_path / "memory.parhip", n).write(indptr, indices)

    in_place = GraphFile(tmp_path / "a" / "place.parhip", n)
    ptr, writable = symmetric_csr(src, dst, n, indices_into=in_place.indices)
    assert isinstance(writable, np.memmap) and str(writable.filename) == str(in_place.path)
    del writable
    mapped = in_place.seal(ptr)
    assert mapping_of(mapped) is not None  # read-only: its pages can be dropped
    np.testing.assert_array_equal(mapped, indices)
    assert in_place.offsets_32 is not wide
    assert in_place.path.read_bytes() == (tmp_path / "memory.parhip").read_bytes()

    header = np.fromfile(in_place.path, np.uint64, 3)
    assert header[1] == n and header[2] == len(indices)
    offsets = np.fromfile(in_place.path, np.uint64 if wide else np.uint32, n + 1,
                          offset=parhip.HEADER_BYTES)
    np.testing.assert_array_equal(offsets, in_place.edges_start + 4 * indptr.astype(np.int64))
    weights = np.arange(n, dtype=np.int32)
    in_place.set_node_weights(weights)
    assert int(np.fromfile(in_place.path, np.uint64, 1)[0]) & 2 == 0  # weights present
    tail = np.fromfile(in_place.path, np.int32, offset=in_place.edges_start + 4 * len(indices))
    np.testing.assert_array_equal(tail, weights)
    in_place.set_node_weights(None)  # and gone again
    assert in_place.path.read_bytes() == (tmp_path / "memory.parhip").read_bytes()
    in_place.remove()
    assert not in_place.path.exists()


def test_seal_refuses_row_pointers_of_another_graph(tmp_path):
    src, dst, n = _edges()
    gf = GraphFile(tmp_path / "g.parhip", n)
    ptr, _ = symmetric_csr(src, dst, n, indices_into=gf.indices)
    with pytest.raises(ValueError, match="indptr ends at"):
        gf.seal(ptr[:-1])


def test_kaminpar_reads_the_graph_file_as_it_reads_arrays(tmp_path):
    pytest.importorskip("kaminpar", reason="the kaminpar package is not installed")
    src, dst, n = _edges()
    indptr, indices = symmetric_csr(src, dst, n)
    weights = np.ones((n, 2), np.int32)
    weights[::3, 1] = 0
    from_arrays = kaminpar.assign(indptr, indices, 3, vweights=weights, seed=2, threads=1)
    gf = GraphFile(tmp_path / "g.parhip", n)
    ptr, _ = symmetric_csr(src, dst, n, indices_into=gf.indices)
    mapped = gf.seal(ptr)
    from_file = kaminpar.assign(ptr, mapped, 3, vweights=weights, seed=2, threads=1,
                                graph_file=gf)
    np.testing.assert_array_equal(from_file, from_arrays)
    via_metis = assign_parts("metis", ptr, mapped, 3, seed=2)
    np.testing.assert_array_equal(via_metis, assign_parts("metis", indptr, indices, 3, seed=2))


def test_a_lean_run_leaves_no_graph_file_in_the_output(tmp_path):
    config = partition_graph(community_graph(n=600), "g", 2, tmp_path / "p", regime="lean")
    written = {p.relative_to(tmp_path / "p").as_posix()
               for p in (tmp_path / "p").rglob("*") if p.is_file()}
    assert written == set(config["files"]) | {"g.json"}
