"""Copies of other machines' feature rows (``feature_cache_gb``): the most-read rows kept after
the warm-up pulls, the same rows as the servers', a hit rate, and copies dropped (and the
rows pulled again) once the owner's rows were written by anyone."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.feature_cache import WARMUP_PULLS, RemoteRows


@pytest.mark.unit
def test_the_most_asked_rows_are_chosen_up_to_the_capacity():
    cache = RemoteRows(capacity=3)
    assert not cache.watch([(1, np.array([5, 7, 9])), (2, np.array([4]))])
    for _ in range(WARMUP_PULLS - 2):
        cache.watch([(1, np.array([7, 9])), (2, np.array([4, 8]))])
    assert cache.watch([(1, np.array([7]))])
    # counts: (1,7) 16, (1,9) 15, (2,4) 15, (2,8) 14, (1,5) 1
    assert {m: ids.tolist() for m, ids in cache.choose().items()} == {1: [7, 9], 2: [4]}
    found, slots = RemoteRows.find(np.array([4, 7, 9]), np.array([9, 3, 4, 10]))
    assert found.tolist() == [True, False, True, False] and slots.tolist() == [2, 0]
    # Kept with the map of slots by id (4 bytes a row of the machine: here no more than the
    # rows kept), a lookup gives the same.
    cache.keep(1, np.array([4, 7, 9]), np.ones((3, 8), np.float32), 0, machine_rows=24)
    assert cache.slot_of[1].tolist() == [-1] * 4 + [0, -1, -1, 1, -1, 2] + [-1] * 14
    found, slots = RemoteRows.find(cache.ids[1], np.array([9, 3, 4, 10]), cache.slot_of[1])
    assert found.tolist() == [True, False, True, False] and slots.tolist() == [2, 0]
    cache.keep(2, np.array([4]), np.ones((1, 8), np.float32), 0, machine_rows=24)
    assert 2 not in cache.slot_of, "a map bigger than the rows kept is not made"
    cache.drop(1)
    assert 1 not in cache.slot_of
    assert RemoteRows(capacity=0).choose() == {}


def _remote_ids(g, machine: int, n: int) -> np.ndarray:
    book = g.get_partition_book()
    lo, hi = (int(x) for x in book.nodes.typed_start[machine:machine + 2, 0])
    return np.arange(lo, hi)[:: max(1, (hi - lo) // n)][:n]


@pytest.mark.multiprocess
def test_a_trainer_keeps_the_rows_it_reads_most_and_they_stay_current(trainer, monkeypatch):
    g = trainer.DistGraph("g")
    book = g.get_partition_book()
    row_bytes = g.ndata["feat"].shape[1] * 4
    on_1 = int(book.nodes.typed_start[2, 0] - book.nodes.typed_start[1, 0])
    capacity = on_1 // 4
    budget = capacity * row_bytes
    monkeypatch.setenv("DGLCTL_FEATURE_CACHE_GB", str(budget / 1e9))
    g = trainer.DistGraph("g")
    feat = g.ndata["feat"]
    store, key = feat.store, feat.kvstore_key
    assert feat.cache_stats() is None, "none kept before a loader learns the read"
    store.want_cache(key)
    remote = _remote_ids(g, 1, 2 * capacity)
    mine = _remote_ids(g, 0, 50)
    hot = remote[:capacity // 2]
    ids = np.concatenate([mine, remote, hot])  # the hot rows asked twice per pull
    want = feat.read_rows(ids).copy()  # the first warm-up pull
    for _ in range(WARMUP_PULLS + 3):
        np.testing.assert_array_equal(feat.read_rows(ids), want)
    stats = feat.cache_stats()
    assert stats.hits > 0 and stats.lookups > stats.hits
    cache = store._caches[key]
    kept = cache.ids[1]
    assert len(kept) == capacity and cache.nbytes <= budget
    assert np.isin(hot - int(g.get_partition_book().nodes.typed_start[1, 0]), kept).all(), \
        "the rows asked most are kept"
    # Another trainer writes a kept row (a push through its owner's server, as any trainer's):
    # the next pull sees the new row, and the machine's copies are dropped.
    row = hot[:1]
    old = feat.read_rows(row).copy()  # (a hit)
    before = feat.cache_stats().hits
    try:
        store._push(key, feat._policy, row, old + 1.5, "set")  # (not this trainer's own write)
        got = feat.read_rows(ids)
        np.testing.assert_array_equal(got[len(mine):len(mine) + 1], old + 1.5)
        assert 1 not in cache.ids, "the written machine's copies are dropped"
        assert feat.cache_stats().hits == before, "rows pulled again are not hits"
    finally:
        store._push(key, feat._policy, row, old, "set")
    np.testing.assert_array_equal(feat.read_rows(ids), want)


@pytest.mark.multiprocess
def test_copies_kept_on_the_device_are_put_in_there(trainer, monkeypatch):
    """A cache given ``place`` (a GPU trainer's loader: here a "device" that is the CPU)
    keeps its copies as the tensors ``place`` made; a pull leaves the hits out of its host
    rows and puts them in on the device (``hits.place``), or on the host for a host read;
    a write drops the machine's copies and its rows come from the host again."""
    import torch

    monkeypatch.setenv("DGLCTL_FEATURE_CACHE_GB", "0.001")
    g = trainer.DistGraph("g")
    feat = g.ndata["feat"]
    store, key = feat.store, feat.kvstore_key
    placed: list[torch.Tensor] = []

    def place(rows):
        placed.append(torch.from_numpy(rows.copy()))
        return placed[-1]

    store.want_cache(key, place)
    ids = np.concatenate([_remote_ids(g, 0, 30), _remote_ids(g, 1, 60)])
    want = feat.read_rows(ids).copy()
    for _ in range(WARMUP_PULLS + 1):
        feat.read_rows(ids)
    cache = store._caches[key]
    assert [id(r) for r in cache.rows.values()] == [id(t) for t in placed] != []
    got = feat.read_parts(ids)
    ((positions, slots, rows),) = got.hits.parts
    assert rows is placed[0] and sorted(positions.tolist()) == list(range(30, 90))
    on_device = got.hits.place(torch.from_numpy(got.host.copy()))
    np.testing.assert_array_equal(on_device.numpy(), want)
    np.testing.assert_array_equal(feat.read_rows(ids), want)  # hits put in on the host
    np.testing.assert_array_equal(feat[torch.from_numpy(ids)].numpy(), want)
    row = ids[30:31]
    try:
        store._push(key, feat._policy, row, want[30:31] + 2.5, "set")
        got = feat.read_parts(ids)
        assert got.hits.parts == [], "the written machine's rows come from its server"
        np.testing.assert_array_equal(got.host[30], want[30] + 2.5)
        assert 1 not in cache.ids
    finally:
        store._push(key, feat._policy, row, want[30:31], "set")


@pytest.mark.multiprocess
def test_without_a_budget_nothing_is_kept(trainer, monkeypatch):
    monkeypatch.delenv("DGLCTL_FEATURE_CACHE_GB", raising=False)
    g = trainer.DistGraph("g")
    feat = g.ndata["feat"]
    feat.store.want_cache(feat.kvstore_key)
    assert feat.cache_stats() is None
    monkeypatch.setenv("DGLCTL_FEATURE_CACHE_GB", "-1")
    from runtime.errors import EnvError

    with pytest.raises(EnvError, match="DGLCTL_FEATURE_CACHE_GB='-1': must be >= 0"):
        trainer.DistGraph("g")


def _bump_many(root: str, n: int) -> None:
    from pathlib import Path

    from runtime.store.shm import ShmArena
    from runtime.store.write_counts import NAME, WriteCounts

    arena = ShmArena("wc-test", 0, root=Path(root))
    counts = WriteCounts(arena.attach(NAME, writable=True), arena.path(NAME))
    for _ in range(n):
        counts.bump("_N/feat")


@pytest.mark.multiprocess
def test_write_counts_lose_no_bump_between_processes(tmp_path):
    """Two processes bumping one tensor's counter at once: every bump is counted (a lost one
    would let a copy outlive a write); other names keep their own counters."""
    import multiprocessing

    from runtime.store.shm import ShmArena
    from runtime.store.write_counts import NAME, SLOTS, WriteCounts, slot

    arena = ShmArena("wc-test", 0, root=tmp_path)
    counts = WriteCounts(arena.create(NAME, (SLOTS,), np.int64), arena.path(NAME))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump_many, args=(str(tmp_path), 400)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    other = next(n for n in ("_N/label", "_N/x", "_N/y") if slot(n) != slot("_N/feat"))
    assert counts.read(["_N/feat", other]) == [800, 0]
