"""Real server processes on 127.0.0.1/127.0.0.2 (two machines, two servers each), real sockets."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from partitioner.loader import load_orig_ids
from runtime.errors import DistError, HandshakeError, PeerTimeout
from runtime.rpc.client import ServerPool
from runtime.rpc.ip_config import read_ip_config
from runtime.rpc.liveness import Liveness
from runtime.rpc.messages import Pull
from runtime.store.shm import job_files
from testing.servers import running_cluster
from testing.timeouts import IDLE_GRACE, PEER_TIMEOUT, TIMEOUT

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def leaving_cluster(two_part_graph, tmp_path):
    """The cluster of servers, with the test config's short idle grace: for the tests that
    wait for the servers to leave on their own."""
    with running_cluster(two_part_graph[1], tmp_path, idle_grace=IDLE_GRACE) as c:
        yield c


def test_pull_matches_original_features(trainer, cluster, two_part_graph):
    g_in, cfg = two_part_graph
    g = trainer.DistGraph("g")
    orig, _ = load_orig_ids(cfg)
    n = g.num_nodes()
    assert n == 600 and g.num_edges() == g_in.total_edges
    ids = np.random.default_rng(0).permutation(n)[:300]  # both machines' rows
    got = g.ndata["feat"][ids].numpy()
    np.testing.assert_array_equal(got, g_in.ndata["_N"]["feat"][orig["_N"][ids]])
    book = g.get_partition_book()
    assert set(book.nid2partid(ids).tolist()) == {0, 1}


def test_pull_in_pieces_lands_in_request_order(trainer, two_part_graph, monkeypatch):
    """Remote rows come back in several pieces; each lands at its rows' positions."""
    g_in, cfg = two_part_graph
    g = trainer.DistGraph("g")
    orig, _ = load_orig_ids(cfg)
    want = g_in.ndata["_N"]["feat"][orig["_N"]]  # by new id
    row_bytes = want[:1].nbytes
    import runtime.tensor_store

    monkeypatch.setattr(runtime.tensor_store, "PULL_PIECE_BYTES", 7 * row_bytes)  # 7 a piece
    ids = np.random.default_rng(2).integers(0, g.num_nodes(), 500)  # both machines, repeats
    book = g.get_partition_book()
    remote = ids[book.nid2partid(ids) != g.machine_id]
    assert len(remote) > 10 * 7  # many pieces, the last one partial (500 ids are not 7k)
    np.testing.assert_array_equal(g.ndata["feat"][ids].numpy(), want[ids])
    # All remote: the in-order path of the sink.
    np.testing.assert_array_equal(g.ndata["feat"][remote].numpy(), want[remote])
    np.testing.assert_array_equal(g.ndata["feat"][remote[:3]].numpy(), want[remote[:3]])


def test_pull_of_rows_outside_the_tensor_is_refused(cluster):
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, cluster.token, cluster.timeout)
    pool.connect()
    try:
        # The server's own error class comes back (DistError), with its message.
        with pytest.raises(DistError, match=r"outside \[0, "):
            pool.call(1, 0, Pull("_N/feat", 1 << 20, np.array([0, -1])))
    finally:
        pool.close()


@pytest.mark.parametrize("bad", [-1, 600, 10**9])
def test_ids_outside_the_graph_are_an_error_not_garbage(trainer, bad):
    """An id past the last node used to come back as uninitialised memory (no machine owns
    it) and a negative one as another row (numpy's wrap-around)."""
    g = trainer.DistGraph("g")
    for ids in ([bad], [0, bad], [599, bad, 3]):  # alone, mixed with local and remote ids
        with pytest.raises(trainer.DistError, match=rf"'_N' id {bad} is outside \[0, 600\)"):
            g.ndata["feat"][ids]
        with pytest.raises(trainer.DistError, match=rf"id {bad} is outside"):
            g.ndata["feat"][ids] = 0.0


def test_push_is_seen_by_another_client(trainer, cluster):
    g = trainer.DistGraph("g")
    feat = g.ndata["feat"]
    ids = np.array([0, 1, 599, 598, 300])
    feat[ids] = np.arange(25, dtype=np.float32).reshape(5, 5)
    np.testing.assert_array_equal(feat[ids].numpy(), np.arange(25, dtype=np.float32).reshape(5, 5))
    feat.add_(np.array([599, 599]), np.ones((2, 5), np.float32))
    # Another client (its own connections, a backup server) reads the pushed row.
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, cluster.token, cluster.timeout)
    pool.connect()
    book = g.get_partition_book()
    m = int(book.nid2partid(np.array([599]))[0])
    reply = pool.call(m, 1, Pull("_N/feat", ids=book.nid2localnid(np.array([599]), m)))
    np.testing.assert_array_equal(reply.rows[0], np.arange(10, 15, dtype=np.float32) + 2)
    pool.close()


def test_degrees_and_find_edges(trainer, two_part_graph):
    g_in, cfg = two_part_graph
    g = trainer.DistGraph("g")
    orig, orig_e = load_orig_ids(cfg)
    inv = np.argsort(orig["_N"])
    src_in, dst_in = g_in.edges[("_N", "_E", "_N")]
    deg = np.bincount(inv[dst_in], minlength=600)
    np.testing.assert_array_equal(g.in_degrees(np.arange(600)).numpy(), deg)
    eids = np.random.default_rng(1).choice(g.num_edges(), 200, replace=False)
    s, d = g.find_edges(eids)
    old = orig_e[("_N", "_E", "_N")][eids]
    np.testing.assert_array_equal(s.numpy(), inv[src_in[old]])
    np.testing.assert_array_equal(d.numpy(), inv[dst_in[old]])


def test_wrong_token_is_refused(cluster):
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, "not-the-token", cluster.timeout)
    with pytest.raises(HandshakeError, match="token mismatch"):
        pool.connect()
    pool.close()


def test_killed_server_is_an_error_within_timeout(trainer, cluster):
    g = trainer.DistGraph("g")
    book = g.get_partition_book()
    remote = book.partid2nids(1)[:5]
    assert g.ndata["feat"][remote].shape == (5, 5)
    cluster.kill_machine(1)
    t0 = time.monotonic()
    with pytest.raises(PeerTimeout, match="machine 1"):
        g.ndata["feat"][remote]
    assert time.monotonic() - t0 < cluster.timeout + PEER_TIMEOUT


def test_servers_exit_and_clean_up_when_clients_leave(leaving_cluster):
    cluster = leaving_cluster
    pool = ServerPool(read_ip_config(cluster.ip_config), 2, cluster.token, cluster.timeout)
    pool.connect()
    assert job_files(cluster.job_id), "main servers publish shared memory"
    pool.close()
    for p in cluster.procs:
        p.wait(cluster.leave_within())
    assert job_files(cluster.job_id) == []


def test_servers_wait_for_every_trainer_before_leaving_on_idle(leaving_cluster):
    """A trainer that finishes before the job's other trainer has connected does not end the
    job: the servers arm their idle shutdown once every trainer (2 machines x 1) has said
    hello (they used to arm on the first, and exit when it left)."""
    cluster = leaving_cluster
    machines = read_ip_config(cluster.ip_config)
    first = ServerPool(machines, 2, cluster.token, cluster.timeout, role="trainer")
    first.connect()
    first.close()
    # Past the servers' idle grace: had they armed on the first trainer, they would be gone.
    time.sleep(Liveness(cluster.timeout, cluster.idle_grace).idle_grace + 0.3 * TIMEOUT)
    assert all(p.poll() is None for p in cluster.procs), "servers left with a trainer missing"
    second = ServerPool(machines, 2, cluster.token, cluster.timeout, role="trainer")
    second.connect()
    second.close()
    for p in cluster.procs:
        p.wait(cluster.leave_within())
    assert job_files(cluster.job_id) == []


def test_two_trainers_barrier_and_shared_pushes(leaving_cluster, tmp_path):
    cluster = leaving_cluster
    script = textwrap.dedent("""
        import sys, numpy as np, torch
        import runtime as dg
        from runtime.dist_tensor import DistTensor
        from runtime.errors import DistError
        dg.initialize()
        g = dg.DistGraph("g")
        rank = int(sys.argv[1])
        ones = DistTensor((g.num_nodes(), 2), np.float32, name="ones",
                          init_func=lambda shape, dtype: torch.ones(shape, dtype=dtype))
        assert (ones[np.arange(g.num_nodes())].numpy() == 1).all()
        t = DistTensor((g.num_nodes(), 1), np.int64, name="marks")
        ids = np.arange(rank, g.num_nodes(), 2)
        t[ids] = np.full((len(ids), 1), rank + 1)
        g.barrier()
        vals = t[np.arange(g.num_nodes())].numpy()[:, 0]
        assert set(vals[0::2].tolist()) == {1} and set(vals[1::2].tolist()) == {2}, vals[:10]
        # A DistEmbedding trained by both trainers: gradients reach each row's owner.
        from runtime.embedding import DistEmbedding
        from runtime.optim import SparseAdagrad, SparseAdam
        uniform = lambda shape, dtype: torch.empty(shape, dtype=dtype).uniform_(-1, 1)
        emb = DistEmbedding(g.num_nodes(), 3, name="emb", init_func=uniform)
        opt = SparseAdam([emb], lr=0.05)
        target = torch.ones(g.num_nodes(), 3)
        rng = np.random.default_rng(rank)
        first = None
        for step in range(80):
            ids = rng.integers(0, g.num_nodes(), 64)
            loss = ((emb(ids) - target[ids]) ** 2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            first = first if first is not None else loss.item()
        g.barrier()
        final = ((emb.weight[np.arange(g.num_nodes())] - 1) ** 2).mean().item()
        assert final < 0.5 * first, (first, final)
        # DGL's semantics: step() is collective; each row is updated once per step from the
        # mean of every trainer's gradients of it (rank 0 sends 1, rank 1 sends 3: mean 2),
        # so Adagrad moves it by exactly lr (it moved 2x lr when each trainer applied its own).
        every = np.arange(g.num_nodes())
        acc = DistEmbedding(g.num_nodes(), 4, name="acc")
        opt = SparseAdagrad([acc], lr=0.1)
        opt.zero_grad(); (acc(every).sum() * (1 + 2 * rank)).backward(); opt.step()
        sums = DistTensor((g.num_nodes(), 4), torch.float32, "acc_sum")[every]
        assert (sums == 4).all(), np.unique(sums)
        np.testing.assert_allclose(acc.weight[every].numpy(), -0.1, rtol=1e-5)
        # A trainer without gradients still takes part; rows only rank 0 saw move by its own.
        if rank == 0:
            acc(np.array([0, 1])).sum().backward()
        opt.step()
        w = acc.weight[np.array([0, 1, 2])].numpy()
        np.testing.assert_allclose(w[:2], -0.1 - 0.1 / np.sqrt(5), rtol=1e-5)
        np.testing.assert_allclose(w[2], -0.1, rtol=1e-5)
        # Optimizer state checkpoints, one file per rank (DGL's save/load).
        opt.save(sys.argv[2])
        other = SparseAdagrad([acc], lr=0.5)
        other._state["acc"][every] = torch.zeros(g.num_nodes(), 4)
        g.barrier()
        other.load(sys.argv[2])
        assert other._lr == 0.1
        got = other._state["acc"][every].numpy()
        assert (got[2:] == 4).all(), (np.unique(got), np.flatnonzero(got[:, 0] != 4)[:10])
        # DGL's DistTensor life cycle, in a job: a non-persistent tensor is freed when every
        # trainer's last handle goes (then its name takes another shape); a persistent one
        # stays, and its name keeps its shape.
        tmp = DistTensor((g.num_nodes(), 2), torch.float32, "tmp")
        try:
            DistTensor((g.num_nodes(), 3), torch.float32, "tmp")
            raise AssertionError("re-created with another shape")
        except DistError:
            pass
        del tmp
        g.barrier()
        tmp = DistTensor((g.num_nodes(), 3), torch.float32, "tmp")
        assert (tmp[every].numpy() == 0).all()
        # Every machine's rows: count_nonzero, |, torch.save of the rows.
        mask = DistTensor((g.num_nodes(),), torch.bool, "mask",
                          init_func=lambda s, d: torch.arange(s[0]) % 2 == 0)
        other_mask = DistTensor((g.num_nodes(),), torch.bool, "mask2")
        union = mask | other_mask
        assert union.count_nonzero() == mask.count_nonzero() > 0
        assert (union[0:g.num_nodes()] == mask[0:g.num_nodes()]).all()
        import io
        torch.save(mask[0:g.num_nodes()], io.BytesIO())
        print("ok", rank)
    """)
    procs = []
    for rank in range(2):
        env = cluster.env("trainer", rank, num_trainers=1)
        env.update(RANK=str(rank), WORLD_SIZE="2")  # as the launcher sets them
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(rank),
                                       str(tmp_path / "opt.pt")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=6 * TIMEOUT)
        assert p.returncode == 0, err
        assert out.startswith("ok")
    for p in cluster.procs:
        p.wait(cluster.leave_within())
    assert job_files(cluster.job_id) == []
