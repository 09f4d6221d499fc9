"""DistDataLoader: batch counts, shuffling, and sampler processes that match in-process sampling."""

from __future__ import annotations

import gc
import os
import signal
import time

import numpy as np
import pytest

from runtime.errors import DistError
from runtime.loader.dataloader import DistDataLoader, DistNodeDataLoader
from runtime.sampling.block import NID
from runtime.sampling.neighbor import NeighborSampler
from testing.timeouts import TIMEOUT


@pytest.mark.unit
def test_batches_cover_ids_once():
    loader = DistDataLoader(np.arange(103), batch_size=10, shuffle=True, seed=3, num_samplers=0)
    seen = np.concatenate([b.numpy() for b in loader])
    assert len(loader) == 11 and np.array_equal(np.sort(seen), np.arange(103))
    again = np.concatenate([b.numpy() for b in loader])
    assert not np.array_equal(seen, again), "a new epoch reshuffles"
    dropped = DistDataLoader(np.arange(103), batch_size=10, drop_last=True, num_samplers=0)
    assert len(dropped) == 10 and all(len(b) == 10 for b in dropped)


def _blocks_signature(blocks):
    return [(b.srcdata[NID].numpy().tolist(), [t.numpy().tolist() for t in b.edges()])
            for b in blocks]


def _inproc_and_forked(ids, batch_size, seed, sampler, num_samplers):
    """The same shuffled loader twice: sampling in this process, and in sampler processes."""
    return [DistDataLoader(ids, batch_size, shuffle=True, seed=seed,
                           collate_fn=sampler.sample_blocks, num_samplers=n)
            for n in (0, num_samplers)]


@pytest.mark.multiprocess
def test_sampler_processes_match_in_process(standalone):
    import runtime as dg

    dg.DistGraph("g", part_config=str(standalone))  # the graph the sampler uses
    ids = np.arange(0, 600, 2)
    inproc, forked = _inproc_and_forked(ids, 32, 9, NeighborSampler([5, 10], seed=1), 2)
    try:
        for _ in range(2):  # two epochs, same processes
            a = [_blocks_signature(b) for b in inproc]
            b = [_blocks_signature(b) for b in forked]
            assert a == b and len(a) == len(inproc)
        pids = list(forked._workers.pids)
        assert len(pids) == 2
    finally:
        forked.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.multiprocess
def test_sampler_processes_reach_the_servers_through_their_own_pool(trainer):
    """In a job, a forked sampler process samples other machines' nodes through connections of
    its own (its context's new pool), never through the trainer's sockets: a graph that kept
    the pool it was made with sent the sampler's requests on the parent's sockets, and the
    trainer waited for a batch that never came."""
    g = trainer.DistGraph("g")
    ids = np.arange(0, g.num_nodes(), 7)  # seeds owned by both machines
    inproc, forked = _inproc_and_forked(ids, 40, 5, NeighborSampler([3, 4], seed=2), 1)
    try:
        a = [_blocks_signature(b) for b in inproc]
        b = [_blocks_signature(b) for b in forked]
        assert a == b and len(a) == len(inproc)
    finally:
        forked.close()


@pytest.mark.unit
def test_node_dataloader_yields_dgl_triples(standalone):
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    loader = DistNodeDataLoader(g, np.arange(50), NeighborSampler([4, 4]), batch_size=20,
                                num_samplers=0)
    input_nodes, seeds, blocks = next(iter(loader))
    np.testing.assert_array_equal(seeds.numpy(), np.arange(20))
    np.testing.assert_array_equal(input_nodes.numpy(), blocks[0].srcdata[NID].numpy())


def _failing_collate(seeds):
    if int(seeds[0]) >= 20:
        raise ValueError("boom in collate")
    return seeds


def _dying_collate(seeds):
    if int(seeds[0]) >= 20:
        os.kill(os.getpid(), signal.SIGKILL)
    return seeds


@pytest.mark.multiprocess
def test_sampler_error_and_death_are_reported(standalone):
    loader = DistDataLoader(np.arange(100), 10, collate_fn=_failing_collate, num_samplers=1)
    with pytest.raises(DistError, match="boom in collate"):
        list(loader)
    loader.close()
    loader = DistDataLoader(np.arange(100), 10, collate_fn=_dying_collate, num_samplers=2)
    t0 = time.monotonic()
    with pytest.raises(DistError, match="killed by signal 9"):
        list(loader)
    assert time.monotonic() - t0 < TIMEOUT
    loader.close()


@pytest.mark.unit
def test_edge_dataloader_pairs_and_exclusion(standalone, two_part_graph):
    import runtime as dg
    from runtime.loader.edge_dataloader import DistEdgeDataLoader

    g = dg.DistGraph("g", part_config=str(standalone))
    eids = np.arange(0, g.num_edges(), 5)
    loader = DistEdgeDataLoader(g, eids, NeighborSampler([-1]), batch_size=64,
                                negative_sampler=3, exclude="self", num_samplers=0)
    src_all, dst_all = g.find_edges(np.arange(g.num_edges()))
    for input_nodes, pos, neg, blocks in loader:
        seeds = blocks[-1].dstdata[NID].numpy()
        ps, pd = (t.numpy() for t in pos.edges())
        e = pos.edata["_ID"].numpy()
        np.testing.assert_array_equal(seeds[ps], src_all.numpy()[e])
        np.testing.assert_array_equal(seeds[pd], dst_all.numpy()[e])
        assert neg.num_edges() == 3 * pos.num_edges()
        ns, _ = (t.numpy() for t in neg.edges())
        np.testing.assert_array_equal(seeds[ns], np.repeat(seeds[ps], 3))
        # Fanout -1 takes every in-edge except the batch's own: none of them appear.
        assert not np.isin(blocks[-1].edge_ids().numpy(), e).any()
        assert np.array_equal(input_nodes.numpy(), blocks[0].srcdata[NID].numpy())
        break


@pytest.mark.multiprocess
def test_edge_batches_cross_sampler_processes(standalone):
    import runtime as dg
    from runtime.loader.edge_dataloader import DistEdgeDataLoader

    g = dg.DistGraph("g", part_config=str(standalone))
    loader = DistEdgeDataLoader(g, np.arange(200), NeighborSampler([3]), batch_size=50,
                                num_samplers=1)
    try:
        batches = list(loader)
        assert len(batches) == 4 and batches[0][1].num_edges() == 50
    finally:
        loader.close()


def _loader(kind, g):
    from runtime.loader.edge_dataloader import DistEdgeDataLoader

    if kind == "ids":
        return DistDataLoader(np.arange(60), 20, collate_fn=NeighborSampler([2]).sample_blocks,
                              num_samplers=1)
    if kind == "nodes":
        return DistNodeDataLoader(g, np.arange(60), NeighborSampler([2]), 20, num_samplers=1)
    return DistEdgeDataLoader(g, np.arange(60), NeighborSampler([2]), 20, num_samplers=1)


def _evaluate(kind, g):
    """What a training script does each epoch: a fresh loader in a function, iterated once."""
    loader = _loader(kind, g)
    assert len(list(loader)) == 3
    return list(loader._workers.pids)


@pytest.mark.multiprocess
@pytest.mark.parametrize("kind", ["ids", "nodes", "edges"])
def test_a_dropped_loader_stops_its_sampler_processes(standalone, kind):
    """A loader made per epoch (an evaluate() function) used to leave its sampler processes
    running until the trainer exited: one more process per loader, each holding a fork of
    the trainer's memory. Dropping the last reference stops them, without waiting for the
    cyclic garbage collector (switched off here)."""
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    gc.disable()
    try:
        for _ in range(3):
            pids = _evaluate(kind, g)
            assert len(pids) == 1
            with pytest.raises(ProcessLookupError):  # stopped and reaped
                os.kill(pids[0], 0)
    finally:
        gc.enable()


@pytest.mark.multiprocess
def test_a_forked_child_never_stops_the_parents_samplers(standalone):
    """A sampler of one loader is a fork of the trainer holding every other loader's pool;
    if it collected one of them, it must not stop that pool's workers (the parent's)."""
    import runtime as dg

    dg.DistGraph("g", part_config=str(standalone))
    loader = _loader("ids", None)
    try:
        assert len(list(loader)) == 3
        pids = list(loader._workers.pids)
        child = os.fork()
        if child == 0:
            loader._workers.close()  # what collecting the pool in the child would do
            os._exit(0)
        assert os.waitpid(child, 0)[1] == 0
        for pid in pids:
            os.kill(pid, 0)  # still running
        assert len(list(loader)) == 3  # and still serving
    finally:
        loader.close()


@pytest.mark.unit
def test_edge_loader_dgl_forms(standalone):
    """DGL's shapes: no negative sampler -> (input_nodes, pair_graph, blocks); the pair graph
    lines up with the last block; DGL's u_dot_v scoring in a local scope; reverse_id."""
    import torch

    import runtime as dg
    from runtime.loader import dataloading
    from runtime.loader import function as fn

    g = dg.DistGraph("g", part_config=str(standalone))
    n = g.num_edges()
    reverse = torch.from_numpy((np.arange(n) + 1) % n)
    loader = dataloading.DistEdgeDataLoader(g, np.arange(0, n, 7), dataloading.NeighborSampler([-1]),
                                            batch_size=40, exclude="reverse_id",
                                            reverse_eids=reverse, num_workers=0)
    input_nodes, pair, blocks = next(iter(loader))
    e = pair.edata[dg.EID]
    np.testing.assert_array_equal(pair.ndata[NID].numpy(), blocks[-1].dstdata[NID].numpy())
    assert torch.equal(input_nodes, blocks[0].srcdata[NID])
    sampled = blocks[-1].edata[dg.EID].numpy()
    assert not np.isin(sampled, e.numpy()).any() and not np.isin(sampled, reverse[e]).any()
    h = torch.randn(pair.num_nodes(), 4)
    with pair.local_scope():
        pair.ndata["h"] = h
        pair.apply_edges(fn.u_dot_v("h", "h", "score"))
        score = pair.edata["score"]
    s, d = pair.edges()
    assert torch.allclose(score, (h[s] * h[d]).sum(-1, keepdim=True))
    assert "h" not in pair.ndata and "score" not in pair.edata
    assert pair.to("cpu").num_edges() == pair.num_edges() == 40


@pytest.mark.unit
def test_hetero_edge_loader_reverse_types(tmp_path, monkeypatch):
    import runtime as dg
    from partitioner import partition_graph
    from runtime.loader import dataloading
    from testing.graphs import hetero_graph

    monkeypatch.setenv("WORLD_SIZE", "1")
    partition_graph(hetero_graph(), "h", 1, tmp_path / "p")
    dg.exit_client()
    dg.initialize()
    g = dg.DistGraph("h", part_config=str(tmp_path / "p" / "h.json"))
    eids = {"writes": np.arange(0, 800, 3), "cites": np.arange(0, 1500, 5)}
    loader = dataloading.DistEdgeDataLoader(
        g, eids, dataloading.MultiLayerNeighborSampler([-1]), batch_size=64,
        negative_sampler=dataloading.negative_sampler.Uniform(2), exclude="reverse_types",
        reverse_etypes={"writes": "written-by", "written-by": "writes"}, shuffle=True)
    seen = 0
    for input_nodes, pos, neg, blocks in loader:
        assert set(input_nodes) <= set(g.ntypes)
        for et in pos.canonical_etypes:
            ps, pd = pos.edges(etype=et)
            e = pos.edges[et].data[dg.EID]
            seen += len(e)
            s_all, d_all = g.find_edges(e, etype=et)
            np.testing.assert_array_equal(pos.nodes[et[0]].data[NID][ps].numpy(), s_all.numpy())
            np.testing.assert_array_equal(pos.nodes[et[2]].data[NID][pd].numpy(), d_all.numpy())
            assert neg.num_edges(et) == 2 * len(e)
            for bt in blocks[-1].canonical_etypes:  # the batch's edges and their reverses
                if bt[1] in (et[1], {"writes": "written-by", "written-by": "writes"}.get(et[1])):
                    assert not np.isin(blocks[-1].edges[bt].data[dg.EID].numpy(), e.numpy()).any()
        for t in pos.ntypes:
            np.testing.assert_array_equal(pos.nodes[t].data[NID].numpy(),
                                          blocks[-1].dstnodes[t].data[NID].numpy())
    assert seen == len(eids["writes"]) + len(eids["cites"])
    dg.exit_client()


@pytest.mark.unit
def test_resume_yields_the_uninterrupted_runs_batches():
    def loader():
        return DistDataLoader(np.arange(95), batch_size=10, shuffle=True, seed=5, num_samplers=0)

    whole = loader()
    epochs = [[b.numpy().tolist() for b in whole] for _ in range(3)]
    assert whole.state_dict() == {"epoch": 3, "step": 0, "seed": 5}
    cut = loader()
    list(cut)  # epoch 0
    it = iter(cut)
    for _ in range(4):
        next(it)
    state = cut.state_dict()  # what a checkpoint after the 4th step of epoch 1 saves
    assert state == {"epoch": 1, "step": 4, "seed": 5}
    resumed = loader()
    resumed.load_state_dict(state)
    assert [b.numpy().tolist() for b in resumed] == epochs[1][4:]
    assert [b.numpy().tolist() for b in resumed] == epochs[2]
    other = DistDataLoader(np.arange(95), batch_size=10, shuffle=True, seed=6, num_samplers=0)
    with pytest.raises(ValueError, match="seed 5"):
        other.load_state_dict(state)
    with pytest.raises(ValueError):
        other.resume(-1, 0)


@pytest.mark.multiprocess
@pytest.mark.parametrize("num_samplers", [0, 2])
def test_resume_mid_epoch_samples_the_same_blocks(standalone, num_samplers):
    """Resumed at (epoch 1, step 3), in this process or in sampler processes, a loader yields
    the blocks, and an edge loader the negatives, of the uninterrupted run."""
    import runtime as dg
    from runtime.loader.edge_dataloader import DistEdgeDataLoader

    g = dg.DistGraph("g", part_config=str(standalone))

    def nodes():
        return DistNodeDataLoader(g, np.arange(0, 600, 3), NeighborSampler([4, 6], seed=2), 25,
                                  shuffle=True, seed=7, num_samplers=num_samplers)

    def edges():
        return DistEdgeDataLoader(g, np.arange(300), NeighborSampler([3], seed=2), 40,
                                  negative_sampler=2, shuffle=True, seed=7,
                                  num_samplers=num_samplers)

    def signature(batch):
        *heads, blocks = batch  # input and output nodes, or input nodes and pair graphs
        out = _blocks_signature(blocks)
        for head in heads:
            parts = head.edges() if hasattr(head, "edges") else (head,)
            out.append([t.numpy().tolist() for t in parts])
        return out

    for make in (nodes, edges):
        whole, resumed = make(), make()
        try:
            epochs = [[signature(b) for b in whole] for _ in range(2)]
            resumed.resume(1, 3)
            assert [signature(b) for b in resumed] == epochs[1][3:]
        finally:
            whole.close()
            resumed.close()


# --- prefetch on a thread of the trainer (0 sampler processes) ------------------------------
def _prefetch_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "dglctl-prefetch"]


def _loaders(ids, sampler, **kwargs):
    """The same shuffled loader made in the step and on the prefetch thread."""
    return [DistDataLoader(ids, 32, shuffle=True, seed=4, collate_fn=sampler.sample_blocks,
                           num_samplers=0, prefetch=p, **kwargs) for p in (False, True)]


@pytest.mark.multiprocess
def test_prefetched_batches_are_the_steps_batches(standalone):
    import runtime as dg

    dg.DistGraph("g", part_config=str(standalone))
    step, ahead = _loaders(np.arange(0, 600, 3), NeighborSampler([4, 6], seed=3))
    assert not step.prefetch and ahead.prefetch
    for _ in range(2):  # two epochs: a new thread each
        a = [_blocks_signature(b) for b in step]
        b = [_blocks_signature(b) for b in ahead]
        assert a == b and len(a) == len(step)
    assert _prefetch_threads() == []
    assert DistDataLoader(np.arange(9), 3, collate_fn=lambda ids: ids).prefetch is False, \
        "a collate function of the user's own runs in the step unless asked"


@pytest.mark.multiprocess
def test_prefetch_samples_on_a_thread_over_its_own_connections(trainer):
    """Batches are made on the prefetch thread, through a server pool of its own (never the
    trainer's sockets: ZeroMQ sockets are not shared between threads), and are the blocks
    the step would have sampled, with seeds on both machines."""
    import threading

    from runtime.context import current_pool, get_context

    g = trainer.DistGraph("g")
    sampler = NeighborSampler([3, 4], seed=2)
    seen = []

    def collate(ids):
        seen.append((threading.current_thread().name, current_pool(get_context())))
        return sampler.sample_blocks(ids)

    ids = np.arange(0, g.num_nodes(), 5)
    step = DistDataLoader(ids, 40, shuffle=True, seed=5, collate_fn=sampler.sample_blocks,
                          num_samplers=0, prefetch=False)
    ahead = DistDataLoader(ids, 40, shuffle=True, seed=5, collate_fn=collate,
                           num_samplers=0, prefetch=True)
    a = [_blocks_signature(b) for b in step]
    b = [_blocks_signature(b) for b in ahead]
    assert a == b and len(a) == len(step)
    main_pool = get_context().pool
    assert {name for name, _ in seen} == {"dglctl-prefetch"}
    assert all(p is not None and p is not main_pool for _, p in seen)
    assert all(p._socks == {} for _, p in seen), "the thread closes its connections"


@pytest.mark.multiprocess
@pytest.mark.parametrize("num_samplers", [0, 1])
def test_features_read_with_a_batchs_ids_are_pulled_ahead(trainer, pulls_by_thread, request,
                                                          num_samplers):
    """The step's read g.ndata["feat"][input_nodes] is learnt on the first batch and pulled on
    the prefetch thread for the next ones: same rows, read without a pull in the step. A
    tensor the trainer writes is never pulled ahead. With a sampler process making the
    batches, the thread takes them from it and pulls their rows the same way."""
    g = trainer.DistGraph("g")
    pulls = pulls_by_thread
    feat, label = g.ndata["feat"], g.ndata["label"]
    loader = DistNodeDataLoader(g, np.arange(0, g.num_nodes(), 2), NeighborSampler([3, 4]),
                                batch_size=30, shuffle=True, num_samplers=num_samplers,
                                queue_size=1)
    assert loader.prefetch
    request.addfinalizer(loader.close)
    n = 0
    for input_nodes, seeds, blocks in loader:
        x = feat[input_nodes]
        y = label[seeds]
        np.testing.assert_array_equal(x.numpy(), feat.read_rows(input_nodes))
        np.testing.assert_array_equal(y.numpy(), label.read_rows(seeds))
        assert num_samplers or input_nodes is blocks[0].srcdata[NID]  # (in process: one)
        n += 1
    steps = [k for k, t in pulls if t == "MainThread"]
    ahead = [k for k, t in pulls if t == "dglctl-prefetch"]
    # In the step: the checks' own reads (2 per batch) and the reads of the batches made
    # before the first read was learnt (queue_size 1: at most 3); the rest came ahead.
    assert len(steps) <= 2 * n + 2 * 3, steps
    assert ahead.count(feat.kvstore_key) >= n - 3 and ahead.count(label.kvstore_key) >= n - 3
    # Written by this trainer: read in the step from then on.
    pulls.clear()
    label[np.arange(3)] = label[np.arange(3)]
    for _, seeds, _ in loader:
        label[seeds]
    assert label.kvstore_key not in [k for k, t in pulls if t == "dglctl-prefetch"]


@pytest.mark.multiprocess
def test_a_prefetch_error_reaches_the_trainer_and_a_broken_loop_stops_the_thread(standalone):
    import runtime as dg

    dg.DistGraph("g", part_config=str(standalone))
    failing = DistDataLoader(np.arange(100), 10, collate_fn=_failing_collate, num_samplers=0,
                             prefetch=True)
    with pytest.raises(ValueError, match="boom in collate"):
        list(failing)
    assert _prefetch_threads() == []
    loader = DistDataLoader(np.arange(600), 10, collate_fn=NeighborSampler([3]).sample_blocks,
                            num_samplers=0)
    it = iter(loader)
    assert _prefetch_threads() == [], "started by the first next(), not by iter()"
    next(it), next(it)
    assert len(_prefetch_threads()) == 1, "the thread waits for the trainer to take more"
    loader.close()
    assert _prefetch_threads() == []
    for i, _ in enumerate(loader):  # a new iteration, a new thread; a break ends it
        if i == 2:
            break
    assert _prefetch_threads() == []
    assert len(list(loader)) == len(loader) and loader.wait_time > 0
    assert _prefetch_threads() == []


@pytest.mark.multiprocess
def test_training_losses_are_the_same_with_and_without_prefetch(trainer):
    """Two epochs of GraphSAGE with a fixed seed: the same loss at every step whether the
    step samples and pulls its batch or the prefetch thread did (dropout draws included)."""
    import torch
    import torch.nn.functional as F

    from runtime.nn.sage import SAGE

    g = trainer.DistGraph("g")

    def losses(prefetch: bool) -> list[float]:
        torch.manual_seed(0)
        model = SAGE(5, 8, 4, 2, dropout=0.5)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        loader = DistNodeDataLoader(g, np.arange(0, g.num_nodes(), 2), NeighborSampler([3, 4]),
                                    batch_size=40, shuffle=True, num_samplers=0,
                                    prefetch=prefetch)
        out = []
        for _ in range(2):
            for input_nodes, seeds, blocks in loader:
                x = g.ndata["feat"][input_nodes]
                y = g.ndata["label"][seeds] % 4
                loss = F.cross_entropy(model(blocks, x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        return out

    a, b = losses(False), losses(True)
    assert len(a) == 2 * 8 and a == b


@pytest.mark.multiprocess
def test_sampler_processes_forked_while_another_loaders_thread_samples(trainer):
    """A second loader forks its sampler process while the first loader's prefetch thread
    samples through the servers (its requests maybe in flight, its locks maybe held): the
    child starts with the main thread only and connections of its own, so both loaders
    still make the blocks they make alone, and nothing is left running."""
    g = trainer.DistGraph("g")
    sampler = NeighborSampler([3, 4], seed=6)
    ids = np.arange(0, g.num_nodes(), 3)

    def loader(num_samplers: int, prefetch: bool) -> DistDataLoader:
        return DistDataLoader(ids, 24, shuffle=True, seed=8, collate_fn=sampler.sample_blocks,
                              num_samplers=num_samplers, prefetch=prefetch)

    alone = [_blocks_signature(b) for b in loader(0, False)]
    first, second = loader(0, True), loader(1, False)
    try:
        batches = iter(first)
        got_first = [_blocks_signature(next(batches))]
        assert _prefetch_threads(), "the first loader's thread is sampling ahead"
        got_second = [_blocks_signature(b) for b in second]  # forks now
        got_first += [_blocks_signature(b) for b in batches]
        assert len(alone) > 4 and got_first == alone and got_second == alone
        pids = list(second._workers.pids)
    finally:
        first.close()
        second.close()
    assert _prefetch_threads() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
