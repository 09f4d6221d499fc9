"""The lean regime writes what the fast one writes; the plan picks a regime by the memory limit
and refuses a graph that fits neither before any work; mapped input pages leave the resident
set when dropped, and nothing else is ever dropped."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from partitioner import PartitionMemoryError, partition_graph
from partitioner.format import ShardWriter, format_bytes
from partitioner.memory import drop_mapped_pages, mapping_of, row_blocks
from partitioner.memory_plan import (
    GraphShape,
    parse_size,
    phase_estimates,
    plan_partition,
)
from partitioner.readers import read_graph, write_npz
from testing.graphs import community_graph, hetero_graph

pytestmark = pytest.mark.unit


def _rss_file_kb() -> int:
    """Resident file-backed pages of this process (kB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def _files(cfg):
    return {k: v["xxh3_128"] for k, v in cfg["files"].items()}


@pytest.mark.parametrize("make, kwargs", [
    (lambda: community_graph(n=900), {"halo_hops": 2, "trainers_per_machine": 2}),
    (lambda: community_graph(n=700), {"method": "random"}),
    (hetero_graph, {"halo_hops": 1}),
])
def test_lean_writes_the_same_bytes_as_fast(tmp_path, make, kwargs):
    fast = partition_graph(make(), "g", 3, tmp_path / "fast", regime="fast", **kwargs)
    lean = partition_graph(make(), "g", 3, tmp_path / "lean", regime="lean", **kwargs)
    assert _files(lean) == _files(fast)
    assert lean["node_map"] == fast["node_map"] and lean["edge_map"] == fast["edge_map"]


def test_lean_from_a_memory_mapped_npz_writes_the_same_bytes(tmp_path):
    # The npz reader maps uncompressed members: the lean run drops their pages as it goes.
    path = tmp_path / "g.npz"
    write_npz(community_graph(n=800), path)
    graph = read_graph(path)
    assert mapping_of(graph.ndata["_N"]["feat"]) is not None
    fast = partition_graph(read_graph(path), "g", 2, tmp_path / "fast", regime="fast")
    lean = partition_graph(graph, "g", 2, tmp_path / "lean", regime="lean")
    assert _files(lean) == _files(fast)


def test_auto_takes_fast_when_it_fits_lean_between_and_refuses_below(tmp_path):
    shape = GraphShape.of(community_graph(n=600))
    fast = max(phase_estimates(shape, lean=False).values())
    lean = max(phase_estimates(shape, lean=True).values())
    assert lean < fast
    assert not plan_partition(shape, memory_limit=fast).lean
    between = plan_partition(shape, memory_limit=(fast + lean) // 2)
    assert between.lean and "exceeds --memory-limit" in between.reason
    with pytest.raises(PartitionMemoryError) as info:
        plan_partition(shape, memory_limit=lean - 1)
    message = str(info.value)
    for phase in ("symmetrize", "assign", "relabel", "write"):
        assert phase in message
    assert format_bytes(lean) in message and "--memory-limit" in message
    # A regime asked for is taken whatever the limit.
    assert plan_partition(shape, memory_limit=1, regime="fast").lean is False


def test_a_graph_over_the_limit_is_refused_before_any_output(tmp_path):
    graph = community_graph(n=600)
    with pytest.raises(PartitionMemoryError, match="even in the lean regime"):
        partition_graph(graph, "g", 2, tmp_path / "o", memory_limit=1 << 20)
    assert list(tmp_path.iterdir()) == []


def test_graph_shape_counts_mapped_and_heap_bytes(tmp_path):
    graph = community_graph(n=500)
    heap = GraphShape.of(graph)
    assert heap.mapped_bytes == 0 and heap.heap_input_bytes == heap.input_bytes
    assert heap.edges == graph.total_edges and heap.nodes == 500
    write_npz(graph, tmp_path / "g.npz")
    mapped = GraphShape.of(read_graph(tmp_path / "g.npz"))
    assert mapped.mapped_bytes == mapped.input_bytes > 0
    # Resident input counts in the fast estimate of every phase, mapped input only where read.
    assert phase_estimates(heap, lean=True)["assign"] > phase_estimates(mapped, lean=True)["assign"]


@pytest.mark.parametrize("text, expected", [("20G", 20 << 30), ("512M", 512 << 20),
                                            ("1.5T", int(1.5 * (1 << 40))), ("1000", 1000),
                                            ("64k", 64 << 10), ("2GiB", 2 << 30),
                                            (" 3gb ", 3 << 30)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "twenty", "-1G", "1X", "1.2.3G"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_drop_mapped_pages_drops_resident_pages_and_keeps_the_data(tmp_path):
    path = tmp_path / "a.npy"
    data = np.random.default_rng(0).random((4096, 64))  # 2 MiB
    np.save(path, data)
    mapped = np.load(path, mmap_mode="r")
    assert mapping_of(mapped) is not None
    before = _rss_file_kb()
    total = float(mapped.sum())  # faults every page in
    resident = _rss_file_kb()
    assert resident - before >= 1500, (before, resident)
    assert drop_mapped_pages(mapped)
    assert resident - _rss_file_kb() >= 1500
    assert float(mapped.sum()) == total == float(data.sum())  # read back from the page cache


def test_drop_mapped_pages_never_touches_heap_writable_or_private_memory(tmp_path):
    heap = np.arange(1 << 20, dtype=np.int64)
    assert mapping_of(heap) is None and not drop_mapped_pages(heap)
    assert heap[12345] == 12345
    path = tmp_path / "a.npy"
    np.save(path, np.arange(1 << 18, dtype=np.int64))
    for mode in ("r+", "c"):
        arr = np.load(path, mmap_mode=mode)
        arr[7] = -1
        assert mapping_of(arr) is None and not drop_mapped_pages(arr)
        assert arr[7] == -1
    assert isinstance(mapping_of(np.load(path, mmap_mode="r")[10:20]), mmap.mmap)


@pytest.mark.parametrize("block_bytes", [1, 40, 4096, 1 << 20])
def test_row_blocks_give_the_gather_in_order(tmp_path, block_bytes):
    rng = np.random.default_rng(1)
    arr = rng.random((1000, 5)).astype(np.float32)
    np.save(tmp_path / "a.npy", arr)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    for rows in (np.sort(rng.choice(1000, 300, replace=False)), rng.integers(0, 1000, 500),
                 np.zeros(0, np.int64)):
        blocks = list(row_blocks(mapped, rows, drop_pages=True, block_bytes=block_bytes))
        got = np.concatenate(blocks) if blocks else np.zeros((0, 5), np.float32)
        np.testing.assert_array_equal(got, arr[rows])


def test_save_blocks_matches_save_and_refuses_short_blocks(tmp_path):
    arr = np.arange(60, dtype=np.int32).reshape(20, 3)
    writer = ShardWriter(tmp_path, background=True)
    writer.save("whole.npy", arr)
    writer.save_blocks("blocks.npy", arr.dtype, arr.shape, iter([arr[:7], arr[7:]]))
    writer.wait()
    assert writer.files["whole.npy"] == writer.files["blocks.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "blocks.npy"), arr)
    writer.save_blocks("short.npy", arr.dtype, arr.shape, iter([arr[:7]]))
    with pytest.raises(ValueError, match="short.npy: blocks gave 84 bytes"):
        writer.wait()
    assert "short.npy" not in writer.files


def test_spill_input_maps_what_was_in_memory_and_keeps_the_rest(tmp_path):
    from partitioner.spill import SPILL_MIN_BYTES, SpillFolder, heap_bytes, spill_input

    graph = hetero_graph()
    big = np.arange(SPILL_MIN_BYTES // 4, dtype=np.float32).reshape(-1, 1)
    graph.ndata["paper"]["big"] = np.resize(big, (graph.num_nodes["paper"], 1 + len(big) // 300))
    small = graph.ndata["author"]["feat"]
    assert heap_bytes(graph) == graph.ndata["paper"]["big"].nbytes
    folder = SpillFolder(tmp_path / "spill")
    spilled = spill_input(graph, folder)
    assert spilled.ntypes == graph.ntypes and list(spilled.edges) == list(graph.edges)
    assert mapping_of(spilled.ndata["paper"]["big"]) is not None
    np.testing.assert_array_equal(spilled.ndata["paper"]["big"], graph.ndata["paper"]["big"])
    assert spilled.ndata["author"]["feat"] is small  # under 1 MiB: kept in memory
    assert heap_bytes(spilled) == 0
    assert [p.name for p in (tmp_path / "spill").iterdir()] == ["0.npy"]
    (tmp_path / "spill" / "1.npy").touch()  # a name taken: the next array skips it
    again = spill_input(graph, folder)
    assert sorted(p.name for p in (tmp_path / "spill").iterdir()) == ["0.npy", "1.npy", "2.npy"]
    np.testing.assert_array_equal(again.ndata["paper"]["big"], graph.ndata["paper"]["big"])


def test_out_edges_one_part_at_a_time_are_those_of_all_parts_at_once():
    from partitioner.relabel import (
        OutPartsJob,
        presort_edges,
        presort_out_edges,
        relabel_nodes,
    )

    graph = hetero_graph()
    part = np.random.default_rng(0).integers(0, 3, graph.total_nodes)
    nodes = relabel_nodes(graph, part, 3)

    def job(allocate):
        presorted = presort_edges(graph)
        return OutPartsJob(graph, part, nodes, 3, presorted,
                           presort_out_edges(graph, presorted), allocate=allocate)

    whole = job(True)()
    lazy = job(False)
    assert sum(len(i) for p in whole for _, i, _ in p) == graph.total_edges
    assert sum(len(i) for p in lazy.parts for _, i, _ in p) == 0  # no buffer taken yet
    with pytest.raises(AssertionError, match="in order"):
        lazy.part(1)
    for p in range(3):
        got = lazy.part(p)
        assert len(got) == len(graph.edges)
        for (a_ptr, a_idx, a_eid), (b_ptr, b_idx, b_eid) in zip(got, whole[p], strict=True):
            np.testing.assert_array_equal(a_ptr, b_ptr)
            np.testing.assert_array_equal(a_idx, b_idx)
            np.testing.assert_array_equal(a_eid, b_eid)
        assert lazy.parts[p] == []  # handed out, not kept
    assert lazy.out_pre == [None] * len(graph.edges) and lazy.tables == []


def test_auto_takes_kaminpar_where_metis_worst_case_exceeds_the_limit(tmp_path):
    from partitioner.memory_plan import metis_worst_case

    graph = community_graph(n=600)
    shape = GraphShape.of(graph)
    worst = metis_worst_case(shape)
    typical = max(phase_estimates(shape, lean=True, method="metis").values())
    assert typical < worst
    plan = plan_partition(shape, method="auto", memory_limit=worst - 1)
    assert plan.method == "kaminpar" and "cannot coarsen" in (plan.method_reason or "")
    assert "--method metis to insist" in plan.method_reason
    assert plan.to_json()["method"] == "kaminpar"
    insisted = plan_partition(shape, method="metis", memory_limit=worst - 1)
    assert insisted.method == "metis" and insisted.method_reason is None
    roomy = plan_partition(shape, method="auto", memory_limit=worst)
    assert roomy.method == "metis" and roomy.method_reason is None

    pytest.importorskip("kaminpar", reason="the kaminpar package is not installed")
    notes = []

    class Notes:
        def phase_start(self, name, detail):
            pass

        def phase_end(self, name, seconds, rate=""):
            pass

        def note(self, text):
            notes.append(text)

    config = partition_graph(graph, "g", 2, tmp_path / "p", method="auto",
                             memory_limit=worst - 1, reporter=Notes())
    assert config["part_method"] == "kaminpar"
    assert any(n.startswith("method auto: kaminpar (METIS's memory") for n in notes), notes
