"""The distributed partitioner on real MPI ranks (mpiexec on this machine, shared-memory and
TCP transports): for a given assignment it writes the single-machine partitioner's files byte
for byte (the oracle), on 1 to 4 ranks, homogeneous npz and heterogeneous chunked inputs, with
trainer pieces and with messages small enough to take many rounds; with ParMETIS every node is
owned once, every edge is inner once, features and original ids round trip and the parts are
balanced; a rank that dies or fails ends every rank and leaves no output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from partitioner import partition_graph
from partitioner.distributed.failure import root_cause
from partitioner.format import read_config
from partitioner.generate import generate_graph
from partitioner.graph import Graph, etype_key
from partitioner.loader import load_orig_ids
from partitioner.readers import write_chunked, write_npz
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until
from tests.partitioner.mpi_ranks import json_line, run_ranks

pytestmark = pytest.mark.multiprocess

FAULT_SCRIPT = Path(__file__).parent / "scripts" / "distributed_fault.py"
WEIGHTS_SCRIPT = Path(__file__).parent / "scripts" / "block_weights.py"


def _input(tmp_path: Path, hetero: bool) -> tuple[Graph, Path]:
    g = generate_graph(600, avg_degree=6, seed=3, hetero=hetero)
    if hetero:
        return g, write_chunked(g, tmp_path / "chunked", "g", 3).parent
    write_npz(g, tmp_path / "g.npz")
    return g, tmp_path / "g.npz"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a partition folder but its JSON config, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix != ".json"}


def _distributed(ranks: int, inp: Path, out: Path, *args: str, btl: str | None = None) -> dict:
    return json_line(run_ranks(ranks, ["-m", "partitioner.distributed", "--input", str(inp),
                                       "--out", str(out), "--graph-name", "g", *args], btl=btl))


@pytest.mark.parametrize(("hetero", "trainers", "ranks", "btl", "budget"), [
    (False, 1, 2, "vader", "64"),
    (False, 2, 3, "tcp", "0.0005"),
    (True, 1, 3, "vader", "0.0005"),
    (True, 2, 4, "tcp", "64"),
    (True, 1, 1, None, "64"),
], ids=["homo-2-shm", "homo-trainers-3-tcp-rounds", "hetero-3-shm-rounds",
        "hetero-trainers-4-tcp", "hetero-1"])
def test_a_given_assignment_writes_the_single_machine_files(tmp_path, hetero, trainers, ranks,
                                                              btl, budget):
    g, inp = _input(tmp_path, hetero)
    saved = tmp_path / "assign.npy"
    partition_graph(g, "g", 3, tmp_path / "metis", method="metis", save_assignment=saved)
    single = partition_graph(g, "g", 3, tmp_path / "single", assignment=saved,
                             trainers_per_machine=trainers)
    report = _distributed(ranks, inp, tmp_path / "dist", "--num-parts", "3", "--assignment",
                          str(saved), "--trainers-per-machine", str(trainers), "--budget-mb",
                          budget, btl=btl)
    dist = read_config(tmp_path / "dist" / "g.json")
    expected = _files(tmp_path / "single")
    assert len(expected) > 30 and _files(tmp_path / "dist") == expected
    assert dict(dist.files) == dict(single.files)  # same checksums recorded
    for key in ("node_map", "edge_map", "num_nodes", "num_edges", "feature_schema",
                "orig_nids", "orig_eids", "part_method", "num_trainers_per_machine"):
        assert dist[key] == single[key], key
    for p in range(3):
        assert dist[f"part-{p}"] == single[f"part-{p}"]
    assert report["quality"]["parts"] == single["quality"]["parts"]
    assert report["quality"]["edge_cut"] == single["quality"]["edge_cut"]
    assert report["quality"]["ranks"] == ranks


def test_random_writes_what_the_single_machine_random_writes(tmp_path):
    g, inp = _input(tmp_path, True)
    partition_graph(g, "g", 4, tmp_path / "single", method="random", seed=9, halo_hops=0,
                    out_edges=False)
    _distributed(2, inp, tmp_path / "dist", "--num-parts", "4", "--method", "random",
                 "--seed", "9", "--halo-hops", "0", "--no-out-edges")
    assert _files(tmp_path / "dist") == _files(tmp_path / "single")


def _check_round_trip(g: Graph, out: Path) -> dict:
    """Every node owned once and every edge inner once, with the input's features and ends."""
    config = read_config(out / "g.json")
    nids, eids = load_orig_ids(config)
    for ntype in g.ntypes:
        assert np.array_equal(np.sort(nids[ntype]), np.arange(g.num_nodes[ntype]))
    eids = {etype_key(et): ids for et, ids in eids.items()}
    for etype in g.edges:
        key = etype_key(etype)
        assert np.array_equal(np.sort(eids[key]), np.arange(g.num_edges(etype)))
    # Homogeneous new id -> (type, input id): from the node map and orig_nids.
    new_type = np.empty(g.total_nodes, np.int64)
    new_orig = np.empty(g.total_nodes, np.int64)
    for t, ntype in enumerate(g.ntypes):
        at = 0
        for lo, hi in config["node_map"][ntype]:
            new_type[lo:hi] = t
            new_orig[lo:hi] = nids[ntype][at:at + hi - lo]
            at += hi - lo
    edge_at = {etype_key(et): 0 for et in g.edges}
    for p in range(config.num_parts):
        entry = config[f"part-{p}"]
        for ntype in g.ntypes:
            lo, hi = config["node_map"][ntype][p]
            for name, arr in g.ndata.get(ntype, {}).items():
                got = np.load(out / entry["node_feat_files"][f"{ntype}/{name}"])
                assert np.array_equal(got, arr[new_orig[lo:hi]]), (p, ntype, name)
        for etype in g.edges:
            key = etype_key(etype)
            csc = entry["csc"][key]
            indptr, indices = np.load(out / csc["indptr"]), np.load(out / csc["indices"])
            d = g.ntypes.index(etype[2])
            lo, hi = config["node_map"][etype[2]][p]
            dst_new = np.repeat(np.arange(lo, hi), np.diff(indptr))
            n = len(indices)
            orig_e = eids[key][edge_at[key]:edge_at[key] + n]
            edge_at[key] += n
            src, dst = g.edges[etype]
            assert np.array_equal(new_orig[dst_new], dst[orig_e]) and np.all(new_type[dst_new] == d)
            assert np.array_equal(new_orig[indices], src[orig_e])
            for name, arr in g.edata.get(etype, {}).items():
                got = np.load(out / entry["edge_feat_files"][f"{key}/{name}"])
                assert np.array_equal(got, arr[orig_e])
    assert all(edge_at[etype_key(et)] == g.num_edges(et) for et in g.edges)
    return config


@pytest.mark.parametrize(("hetero", "ranks", "balance_edges"),
                         [(False, 2, False), (True, 3, True), (False, 4, False)])
def test_parmetis_on_ranks_owns_every_node_and_edge_once(tmp_path, hetero, ranks,
                                                         balance_edges):
    g, inp = _input(tmp_path, hetero)
    extra = ["--balance-edges"] if balance_edges else []
    report = _distributed(ranks, inp, tmp_path / "dist", "--num-parts", "4", *extra)
    config = _check_round_trip(g, tmp_path / "dist")
    q = report["quality"]
    assert config["part_method"] == "parmetis" and q["library"] == "ptscotch"
    # PT-Scotch balances the first constraint only: the config says so; the report gives
    # the balance reached on the others (in-degree is the parts' inner edges).
    assert config["balance"] == ["nodes"], config["balance"]
    assert q["balance"]["nodes"] <= 1.1, q
    assert {"edges", "train_nodes"} <= set(q["balance"]), q
    random_cut = partition_graph(g, "g", 4, tmp_path / "random", method="random")
    assert q["edge_cut"] < 0.5 * random_cut["quality"]["edge_cut"], q


@pytest.mark.parametrize(("hetero", "ranks"), [(False, 2), (True, 3)])
def test_in_degree_is_counted_in_the_symmetrising_exchange(hetero, ranks):
    """--balance-edges: each node's in-degree over every edge type (self-loops and duplicates
    included, as the single-machine weights count them) comes with the symmetric rows, which
    stay the same: both directions of every edge, no self-loop, no duplicate."""
    from tests.partitioner.scripts.block_weights import loopy_graph

    got = json_line(run_ranks(ranks, [str(WEIGHTS_SCRIPT), "hetero" if hetero else "homo"]))
    g = loopy_graph(hetero)
    offsets = g.node_offsets()
    degree = np.zeros(g.total_nodes, np.int64)
    train = np.zeros(g.total_nodes, np.int64)
    pairs = []
    for (s, _, d), (src, dst) in g.edges.items():
        hs = src + offsets[g.ntypes.index(s)]
        hd = dst + offsets[g.ntypes.index(d)]
        degree += np.bincount(hd, minlength=g.total_nodes)
        pairs += [np.stack([hs, hd], 1), np.stack([hd, hs], 1)]
    assert any(np.any(src == dst) for src, dst in g.edges.values())  # the case is there
    for t, ntype in enumerate(g.ntypes):
        if "train_mask" in g.ndata.get(ntype, {}):
            train[offsets[t]:offsets[t + 1]] = g.ndata[ntype]["train_mask"]
    both = np.unique(np.concatenate(pairs), axis=0)
    both = both[both[:, 0] != both[:, 1]]
    without, with_degree = got["False"], got["True"]
    assert without["names"] == ["nodes", "train"]
    assert with_degree["names"] == ["nodes", "train", "in-degree"]
    assert np.array_equal(np.asarray(with_degree["weights"]),
                          np.stack([np.ones(g.total_nodes, np.int64), train, degree], 1))
    for run in (without, with_degree):
        assert np.array_equal(np.unique(np.asarray(run["pairs"]), axis=0), both)
        assert len(run["pairs"]) == len(both)  # no duplicate row


def _no_rank_left(marker: str) -> None:
    """No process whose command line holds ``marker`` is still running."""
    def running() -> list[tuple[str, str]]:
        left = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if marker in cmd and "pytest" not in cmd:
                    left.append((d.name, cmd))
        return left

    with contextlib.suppress(WaitTimeout):  # what is left is killed and named below
        wait_until(lambda: not running(), f"no rank of {marker} running", interval=0.1)
    left = running()
    for pid, _ in left:
        os.kill(int(pid), signal.SIGKILL)
    assert not left, left


def _errors(stderr: str) -> list[dict]:
    """The error lines ranks printed (mpiexec may interleave other ranks' output)."""
    found = []
    for line in stderr.splitlines():
        if line.startswith('{"error"'):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _gone(path: Path) -> None:
    wait_until(lambda: not path.exists(), f"{path} gone")


@pytest.mark.parametrize("fault", ["kill", "raise"])
def test_a_rank_that_dies_ends_every_rank_and_leaves_no_output(tmp_path, fault):
    g, inp = _input(tmp_path, False)
    out = tmp_path / "dist"
    t0 = time.monotonic()
    proc = run_ranks(3, [str(FAULT_SCRIPT), "--input", str(inp), "--out", str(out),
                         "--graph-name", "g", "--num-parts", "3", "--method", "random"],
                     env={"FAULT": fault, "FAULT_RANK": "1", "FAULT_AT": "3"})
    took = time.monotonic() - t0
    assert proc.returncode != 0, proc.stdout
    assert "rank 1 fails now" in proc.stderr
    if fault == "raise":
        error, _ = root_cause(_errors(proc.stderr))
        assert error is not None and error["rank"] == 1, proc.stderr[-3000:]
        assert "injected failure" in error["error"], error
    else:
        assert "signal 9" in proc.stderr or "Killed" in proc.stderr, proc.stderr[-2000:]
    assert took < 6 * TIMEOUT
    _no_rank_left(str(FAULT_SCRIPT))
    assert not out.exists()
    # The ranks mpiexec ended may wait a moment to be reaped (a zombie's PID still exists, and
    # a live PID's folder is never touched): the leftover folder's PID must be gone first.
    for left in tmp_path.glob(".dist.tmp-*"):
        _gone(Path("/proc") / left.name.rsplit("-", 1)[1])
    # What the dead ranks left (their temporary folder) goes with the next run into ``out``.
    _distributed(2, inp, out, "--num-parts", "3", "--method", "random")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dist.tmp")] == []
    assert read_config(out / "g.json").num_parts == 3


@pytest.mark.parametrize("failing", [1, 0])
def test_a_failing_rank_removes_nothing_under_a_rank_still_writing(tmp_path, failing):
    """Rank ``failing`` raises while rank 2 is between making its part's folder and opening a
    shard in it (the order fixed by events, see the script): rank 2's open still succeeds,
    the root cause is the failing rank's error and no rank reports a missing file; no rank is
    left, ``out`` never appears, and the next run removes the temporary folder. (Rank 0 is
    the rank that always removed the shared folder when it failed, rank 1 when it had made
    the folder.)"""
    g, inp = _input(tmp_path, False)
    out = tmp_path / "dist"
    events = tmp_path / "events"
    events.mkdir()
    proc = run_ranks(3, [str(FAULT_SCRIPT), "--input", str(inp), "--out", str(out),
                         "--graph-name", "g", "--num-parts", "3", "--method", "random"],
                     env={"FAULT": "mid-write", "FAULT_RANK": str(failing), "WRITER_RANK": "2",
                          "FAULT_EVENTS": str(events), "FAULT_TIMEOUT": str(TIMEOUT)})
    assert proc.returncode != 0, proc.stdout
    assert f"rank {failing} fails now" in proc.stderr, proc.stderr[-3000:]
    said = sorted(p.name for p in events.iterdir())
    assert said == ["failed", "writing", "wrote"], (said, proc.stderr[-3000:])
    errors = _errors(proc.stderr)
    assert not [e for e in errors if "FileNotFoundError" in e["error"]], errors
    cause, _ = root_cause(errors)
    assert cause is not None and cause["rank"] == failing, errors
    assert "injected failure" in cause["error"] and cause["consequence"] is None, cause
    _no_rank_left(str(FAULT_SCRIPT))
    assert not out.exists()
    for left in tmp_path.glob(".dist.tmp-*"):
        _gone(Path("/proc") / left.name.rsplit("-", 1)[1])
    _distributed(2, inp, out, "--num-parts", "3", "--method", "random")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dist.tmp")] == []
    assert read_config(out / "g.json").num_parts == 3
    del g


def test_bad_input_is_one_error_naming_it_and_nothing_is_written(tmp_path):
    g, inp = _input(tmp_path, False)
    proc = run_ranks(2, ["-m", "partitioner.distributed", "--input", str(inp), "--out",
                         str(tmp_path / "dist"), "--num-parts", "3", "--assignment",
                         str(tmp_path / "missing.npy")])
    assert proc.returncode != 0
    errors = _errors(proc.stderr)
    assert errors and "missing.npy" in errors[0]["error"], proc.stderr[-2000:]
    assert not (tmp_path / "dist").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".dist")] == []
    proc = run_ranks(2, ["-m", "partitioner.distributed", "--input", str(inp), "--out",
                         str(tmp_path / "dist"), "--num-parts", "3", "--halo-hops", "2"])
    assert proc.returncode != 0 and "halos of 0 or 1 hop" in proc.stderr
    del g
