"""Typed messages: every field and array slot survives the wire by name, unknown or malformed
messages are refused, and errors come back as their own class."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.errors import OutEdgesMissing
from runtime.errors import (
    DistError,
    HandshakeError,
    ProtocolError,
    RemoteError,
    ShmError,
    from_wire,
)
from runtime.routing import split_by_owner, split_remote
from runtime.rpc import messages as msg
from runtime.rpc.wire import pack

pytestmark = pytest.mark.unit


def _roundtrip(m: msg.Message, **envelope):
    frames = [bytes(f) for f in msg.encode(m, **envelope)]
    return msg.decode(frames)


def test_fields_and_arrays_travel_by_name():
    m = msg.Sample(["a:e:b", "b:f:a"], [1, 2], [10, -1], True, 7, None, "out",
                   [np.arange(3), np.arange(5, dtype=np.int32)],
                   [np.empty(0, np.int64), np.array([4])])
    back, env = _roundtrip(m, id=42)
    assert type(back) is msg.Sample and env == {"id": 42}
    assert (back.etypes, back.salts, back.fanouts, back.replace, back.seed, back.prob,
            back.edge_dir) == (m.etypes, m.salts, m.fanouts, True, 7, None, "out")
    for got, want in zip(back.seeds + back.excluded, m.seeds + m.excluded, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    push, _ = _roundtrip(msg.Push("_N/feat", "add", np.array([3, 1]), rows[:2]))
    assert (push.name, push.mode) == ("_N/feat", "add")
    np.testing.assert_array_equal(push.ids, [3, 1])
    np.testing.assert_array_equal(push.rows, rows[:2])
    piece, _ = _roundtrip(msg.PullPiece(1, 3, 8, rows))
    assert (piece.chunk, piece.chunks, piece.row0, piece.rows.shape) == (1, 3, 8, (4, 3))
    none, _ = _roundtrip(msg.PullReply(np.empty((0, 5), np.float32)))  # empty, 2-D
    assert none.rows.shape == (0, 5) and none.rows.dtype == np.float32
    empty, _ = _roundtrip(msg.SampleReply())
    assert empty.seed_idx == [] and empty.nbrs == [] and empty.eids == []
    stats, _ = _roundtrip(msg.StatsReply(1, 2, 3, 0, 1.5, 2, 0, 1, ["_N/feat"]))
    assert stats.tensors == ["_N/feat"] and stats.uptime == 1.5


def test_unknown_and_malformed_messages_are_refused():
    with pytest.raises(ProtocolError, match="unknown message 'exec'"):
        msg.decode([bytes(f) for f in pack({"op": "exec", "code": "print(1)"})])
    with pytest.raises(ProtocolError, match="malformed 'pull'"):
        msg.decode([bytes(f) for f in pack({"op": "pull", "nmae": "x"}, [np.arange(2)])])
    with pytest.raises(ProtocolError, match="carries 0 arrays, expected 2"):
        msg.decode([bytes(f) for f in pack({"op": "push", "name": "x"})])
    with pytest.raises(TypeError, match="registered twice"):
        msg.message("pull")(type("Again", (msg.Message,), {}))


def test_errors_cross_the_wire_as_their_own_class():
    for exc in (ShmError("no room", hint="bigger tmpfs"), HandshakeError("wrong token"),
                OutEdgesMissing("no out-edges", hint="re-partition")):
        reply, _ = _roundtrip(msg.ErrorReply.of(exc))
        back = from_wire(reply.type, reply.message, reply.hint)
        assert type(back) is type(exc)
        assert (back.message, back.hint) == (exc.message, exc.hint)
        assert back.exit_code == exc.exit_code
    other = msg.ErrorReply.of(IndexError("index 9 is out of bounds"))
    back = from_wire(other.type, other.message, other.hint)
    assert type(back) is RemoteError and "IndexError: index 9" in back.message
    assert isinstance(back, DistError)


def test_split_by_owner_keeps_positions():
    from partitioner.partition_book import RangeMap

    rmap = RangeMap(["_N"], np.array([[[0, 4]], [[4, 10]]]))
    ids = np.array([5, 0, 9, 3, 4])
    shares = split_by_owner(ids, rmap, "_N")
    assert [s.machine for s in shares] == [0, 1]
    np.testing.assert_array_equal(ids[shares[0].sel], [0, 3])
    np.testing.assert_array_equal(shares[0].local, [0, 3])
    np.testing.assert_array_equal(ids[shares[1].sel], [5, 9, 4])
    np.testing.assert_array_equal(shares[1].local, [1, 5, 0])
    (only,) = split_by_owner(np.array([6, 5]), rmap, "_N")  # one owner: the fast path
    assert only.machine == 1 and only.sel == slice(None)
    np.testing.assert_array_equal(only.local, [2, 1])
    with pytest.raises(DistError, match=r"'_N' id 10 is outside \[0, 10\)"):
        split_by_owner(np.array([1, 10]), rmap, "_N")


@pytest.mark.parametrize("sizes", [[4, 6], [0, 5, 0, 3, 7], [1] * 9, [10, 0]])
def test_split_by_owner_equals_a_stable_sort_of_owners(sizes):
    """The compiled grouping (a counting sort) against the numpy reference: owners by
    searchsorted, positions by a stable argsort; empty parts own nothing."""
    from partitioner.partition_book import RangeMap

    bounds = np.concatenate([[0], np.cumsum(sizes)])
    rmap = RangeMap(["_N"], np.stack([bounds[:-1], bounds[1:]], 1)[:, None, :])
    ids = np.random.default_rng(len(sizes)).integers(0, bounds[-1], 500)
    owner = np.searchsorted(bounds[1:], ids, side="right")
    order = np.argsort(owner, kind="stable")
    shares = split_by_owner(ids, rmap, "_N")
    assert [s.machine for s in shares] == sorted(set(owner.tolist()))
    for s in shares:
        want = order[owner[order] == s.machine]
        np.testing.assert_array_equal(np.arange(len(ids))[s.sel], want)  # (or a slice: all)
        np.testing.assert_array_equal(s.local, ids[want] - bounds[s.machine])
    assert split_by_owner(ids[:0], rmap, "_N") == []


@pytest.mark.parametrize("sizes", [[4, 6], [0, 5, 0, 3, 7], [1] * 9, [10, 0]])
def test_split_remote_is_split_by_owner_less_one_machine(sizes):
    """A pull's split: the other machines' shares exactly as split_by_owner gives them, and
    the count of the machine's own ids (read in place, not listed)."""
    from partitioner.partition_book import RangeMap

    bounds = np.concatenate([[0], np.cumsum(sizes)])
    rmap = RangeMap(["_N"], np.stack([bounds[:-1], bounds[1:]], 1)[:, None, :])
    ids = np.random.default_rng(len(sizes)).integers(0, bounds[-1], 500)
    every = split_by_owner(ids, rmap, "_N")
    for me in range(len(sizes)):
        others, n_mine = split_remote(ids, rmap, "_N", me)
        want = [s for s in every if s.machine != me]
        assert [s.machine for s in others] == [s.machine for s in want]
        for got, s in zip(others, want, strict=True):
            n = len(ids)
            np.testing.assert_array_equal(np.arange(n)[got.sel], np.arange(n)[s.sel])
            np.testing.assert_array_equal(got.local, s.local)
        assert n_mine == int(((ids >= bounds[me]) & (ids < bounds[me + 1])).sum())
    assert split_remote(ids[:0], rmap, "_N", 1) == ([], 0)
    with pytest.raises(DistError, match=r"'_N' id -1 is outside"):
        split_remote(np.array([-1, 3]), rmap, "_N", 0)
