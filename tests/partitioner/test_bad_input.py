"""Faults and trust (issue 12): bad input and failed writes end in an error that names the
file, line, value and fix, and leave nothing behind."""

from __future__ import annotations

import ctypes
import errno
import os
import re
import resource
from pathlib import Path

import numpy as np
import pytest

from dglctl.cli import main
from partitioner import errors, partition_graph
from partitioner.errors import PartitionerError, PartitionInputError, PartitionOptionError
from partitioner.format import read_config
from partitioner.graph import HOMO_ETYPE, Graph
from partitioner.readers import read_chunked, read_edge_list, write_chunked, write_edge_list
from partitioner.readers.npz import write_npz
from testing.graphs import community_graph

pytestmark = pytest.mark.unit

HUGE_ID = 3_000_000_000


def _input_error(path: Path, line: int | None):
    """``pytest.raises`` for a PartitionInputError whose message starts ``path:line:``."""
    where = f"{path}:{line}:" if line else f"{path}:"
    return pytest.raises(PartitionInputError, match="^" + re.escape(where))


# -- 1. text edge lists whose later lines have other columns -------------------------------------


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        ("0 1\n1 2\n1 2 3 4\n", 3, "'3 4'"),
        ("0,1\n1,2\n1,2,x\n", 3, "'x'"),
        ("src dst\n0 1\n\n# c\n1 2 7\n", 5, "'7'"),
        ("0 1 0.5\n1 2 0.25 9\n", 2, "'9'"),
        ("0\t1\tfoo\n1\t2\n", 2, "found 2"),
    ],
)
def test_later_line_with_other_columns_names_file_line_and_value(tmp_path, content, line,
                                                                   fragment):
    path = tmp_path / "edges.csv"
    path.write_text(content)
    with _input_error(path, line) as info:
        read_edge_list(path)
    bad_text = content.splitlines()[line - 1]
    assert repr(bad_text) in info.value.message and fragment in info.value.message
    assert info.value.line == line and "columns" in (info.value.hint or "")


def test_chunked_edge_chunk_with_extra_column_names_its_line(tmp_path):
    g = community_graph(n=40, deg=2)
    meta = write_chunked(g, tmp_path / "c", "c", num_chunks=1)
    chunk = next((tmp_path / "c" / "edges").iterdir())
    lines = chunk.read_text().splitlines()
    lines[3] += " 1"
    chunk.write_text("\n".join(lines) + "\n")
    with _input_error(chunk, 4):
        read_chunked(meta)


def test_consistent_columns_and_written_edge_lists_still_read(tmp_path):
    (tmp_path / "w.txt").write_text("0 1 0.5 a\n1 2 0.25 b\n")
    g = read_edge_list(tmp_path / "w.txt")
    np.testing.assert_array_equal(g.edata[HOMO_ETYPE]["weight"], [0.5, 0.25])
    small = community_graph(n=50, deg=2)
    for delimiter in (" ", ",", "\t"):
        path = tmp_path / f"g{len(delimiter)}{ord(delimiter)}.txt"
        write_edge_list(small, path, delimiter=delimiter)
        back = read_edge_list(path, num_nodes=50)
        np.testing.assert_array_equal(back.edges[HOMO_ETYPE][1], small.edges[HOMO_ETYPE][1])


# -- 2. node ids far beyond the number of nodes ------------------------------------------------


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture
def memory_cap():
    """Cap the address space a few GiB above its size now: code that still allocates for
    3e9 ids fails with MemoryError instead of taking the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_size() + (4 << 30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _assert_names_id_and_fix(err: PartitionInputError) -> None:
    assert f"{HUGE_ID}" in err.message
    assert "relabel" in (err.hint or "") and "num_nodes" in (err.hint or "")


def test_text_id_far_beyond_the_edges_is_refused_naming_file_and_line(tmp_path, memory_cap):
    path = tmp_path / "e.txt"
    path.write_text(f"0 1\n1 2\n# x\n0 {HUGE_ID}\n")
    with _input_error(path, 4) as info:
        read_edge_list(path)
    _assert_names_id_and_fix(info.value)
    assert f"'0 {HUGE_ID}'" in info.value.message


def test_npz_id_far_beyond_the_edges_is_refused(tmp_path, memory_cap):
    """The same rule for an .npz without num_nodes (and without node data to count)."""
    from partitioner.readers.npz import read_npz

    path = tmp_path / "g.npz"
    np.savez(path, src=np.array([0, 1]), dst=np.array([1, HUGE_ID]))
    with pytest.raises(PartitionInputError) as info:
        read_npz(path)
    _assert_names_id_and_fix(info.value)
    assert info.value.path == str(path)


def test_num_nodes_confirms_a_sparse_id_space(tmp_path, memory_cap):
    path = tmp_path / "e.txt"
    path.write_text(f"0 {HUGE_ID}\n")
    g = read_edge_list(path, num_nodes=HUGE_ID + 1)  # the user says so: no refusal
    assert g.total_nodes == HUGE_ID + 1
    (tmp_path / "small.txt").write_text("0 5000\n")  # sparse, but cheap: still read
    assert read_edge_list(tmp_path / "small.txt").total_nodes == 5001


@pytest.mark.parametrize("method", ["random", "metis", "kaminpar"])
def test_partition_arrays_with_huge_id_refused_before_allocating(tmp_path, memory_cap, method):
    src, dst = np.array([0, 1]), np.array([1, HUGE_ID])
    with pytest.raises(PartitionInputError) as info:
        partition_graph((src, dst), "g", 2, tmp_path / "p", method=method)
    _assert_names_id_and_fix(info.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("method", ["metis", "kaminpar"])
def test_node_count_over_32_bits_refused_before_symmetrizing(tmp_path, memory_cap, method):
    g = Graph.homogeneous(np.array([0]), np.array([1]), 2**31 + 5)
    with pytest.raises(PartitionOptionError, match="32-bit") as info:
        partition_graph(g, "g", 2, tmp_path / "p", method=method)
    assert "random" in (info.value.hint or "")


def test_cli_partition_huge_id_names_file_and_fix(tmp_path, capsys, memory_cap):
    path = tmp_path / "e.txt"
    path.write_text(f"0 {HUGE_ID}\n")
    code = main(["partition", "--input", str(path), "--num-parts", "2", "--out",
                 str(tmp_path / "p"), "--method", "random"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{path}:1:" in err and str(HUGE_ID) in err and "relabel" in err
    assert "internal error" not in err


# -- 3. the disk fills up while the output is written ---------------------------------------------


class _TinyDisk:
    """Stands in for a 2 MiB file system where mounting one is not possible: files opened for
    writing under ``root`` fail with ENOSPC once 2 MiB have been written to them in all."""

    def __init__(self, root: Path) -> None:
        self.root, self.left = str(root), 2 << 20
        self.real_open = open

    def open(self, path, mode="r", *args, **kwargs):
        fh = self.real_open(path, mode, *args, **kwargs)
        if "w" in mode and os.path.abspath(os.fspath(path)).startswith(self.root):
            return _LimitedFile(fh, self, os.fspath(path))
        return fh


class _LimitedFile:
    """A file whose writes count against a :class:`_TinyDisk` (not a real file object, so that
    numpy writes it with ``write`` too)."""

    def __init__(self, fh, disk: _TinyDisk, path: str) -> None:
        self._fh, self._disk, self._path = fh, disk, path

    def write(self, data) -> int:
        self._disk.left -= memoryview(data).nbytes if not isinstance(data, str) else len(data)
        if self._disk.left < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path)
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """A folder on a 2 MiB file system: a real tmpfs when this process may mount one (root),
    else the writers' ``open`` limited to 2 MiB (:class:`_TinyDisk`)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0 and libc.mount(b"tmpfs", str(disk).encode(), b"tmpfs", 0,
                                        b"size=2m") == 0:
        yield disk
        libc.umount2(str(disk).encode(), 2)  # MNT_DETACH: even if a file were still open
        return
    monkeypatch.setattr("builtins.open", _TinyDisk(disk).open)
    yield disk


def _graph_with_big_features(n: int = 1000) -> Graph:
    g = community_graph(n=n, deg=4)
    g.ndata["_N"]["feat"] = np.ones((n, 1024), np.float32)  # 4 MiB: twice the disk
    return g


def _assert_disk_full_error(err: BaseException, out: Path) -> None:
    assert isinstance(err, errors.OutputWriteError), repr(err)
    assert str(out) in err.message and "no space left" in err.message
    assert err.needed and err.needed > 0 and "free" in (err.hint or "")


def test_full_disk_while_partitioning_is_clear_and_leaves_nothing(small_disk, monkeypatch):
    import partitioner.pipeline as pipeline

    # As when the up-front estimate of the output falls short: the writes fill the disk.
    monkeypatch.setattr(pipeline, "_check_disk", lambda out, plan: None)
    out = small_disk / "parts"
    with pytest.raises(PartitionerError) as info:
        partition_graph(_graph_with_big_features(), "g", 2, out, method="random")
    _assert_disk_full_error(info.value, out)
    assert list(small_disk.iterdir()) == []


def test_an_output_larger_than_the_free_disk_is_refused_up_front(small_disk):
    out = small_disk / "parts"
    with pytest.raises(errors.OutputWriteError) as info:
        partition_graph(_graph_with_big_features(), "g", 2, out, method="random")
    err = info.value
    assert str(out) in err.message and "needs an estimated 4.0 MiB of disk" in err.message
    assert "2.0 MiB free" in err.message and err.needed >= 4 << 20
    assert list(small_disk.iterdir()) == []


def test_full_disk_in_cli_exits_with_message(tmp_path, small_disk, capsys):
    write_npz(_graph_with_big_features(), tmp_path / "g.npz")
    out = small_disk / "parts"
    code = main(["partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2", "--out",
                 str(out), "--method", "random"])
    err = capsys.readouterr().err
    assert code == errors.OutputWriteError.exit_code and code != 70, err
    assert str(out) in err and "needs an estimated" in err and "internal error" not in err
    assert list(small_disk.iterdir()) == []


def test_full_disk_while_writing_chunked(small_disk):
    target = small_disk / "chunked"
    with pytest.raises(PartitionerError) as info:
        write_chunked(_graph_with_big_features(), target, "g")
    _assert_disk_full_error(info.value, target)
    assert list(small_disk.iterdir()) == []


def test_quota_exceeded_writing_the_config(tmp_path, monkeypatch):
    from partitioner import pipeline

    def over_quota(path, config):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(path))

    monkeypatch.setattr(pipeline, "write_config", over_quota)
    out = tmp_path / "q"
    with pytest.raises(PartitionerError) as info:
        partition_graph(community_graph(n=60, deg=2), "g", 2, out, method="random")
    assert isinstance(info.value, errors.OutputWriteError), repr(info.value)
    assert str(out) in info.value.message and "quota" in info.value.message.lower()
    assert list(tmp_path.iterdir()) == []


# -- 4. temporary folders of runs that died ------------------------------------------------------


def test_next_run_removes_stale_temp_folders_of_dead_processes_only(tmp_path):
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # never a live process
    dead = tmp_path / f".p.tmp-{dead_pid}"
    alive = tmp_path / f".p.tmp-{os.getppid()}"
    others = [tmp_path / ".p.tmp-abc", tmp_path / f".q.tmp-{dead_pid}", tmp_path / "p.tmp-1"]
    for folder in (dead, alive, *others):
        folder.mkdir()
        (folder / "part0").mkdir()
    partition_graph(community_graph(n=60, deg=2), "g", 2, tmp_path / "p", method="random")
    assert not dead.exists()
    assert alive.exists() and all(f.exists() for f in others)
    assert read_config(tmp_path / "p")["num_parts"] == 2


def test_a_full_disk_while_parsing_into_files_is_clear_and_leaves_nothing(small_disk,
                                                                           monkeypatch):
    from partitioner import spill

    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 1024)
    column = spill.Column(np.int64, folder=spill.SpillFolder(small_disk / "input"))
    with pytest.raises(errors.OutputWriteError) as info:
        for _ in range(12):  # 3 MiB in 256 KiB chunks, on a 2 MiB disk
            column.append(np.zeros(1 << 15, np.int64))
    assert str(small_disk / "input") in info.value.message
    assert "no space left" in info.value.message and "df -h" in (info.value.hint or "")
    assert list((small_disk / "input").iterdir()) == []
