"""Batches on the trainer's device: ``runtime.device()``, ``ddp_backend``, and the loaders'
``device=`` path (pinned host memory, non-blocking copies on a side stream, the trainer's
stream waiting at hand-over).

Without a GPU the copy path runs with a device plan of the tests' own (``RecordingPlan``: the
"device" is the CPU, every pin, copy, event and wait is recorded with its thread); the same
tests run on CUDA whenever torch sees a GPU, skipped with the reason otherwise."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from runtime.errors import DistError
from runtime.loader.dataloader import DistDataLoader, DistNodeDataLoader
from runtime.loader.device_copy import CudaPlan, DeviceCopier, map_tensors, plan_for
from runtime.sampling.block import NID
from runtime.sampling.neighbor import NeighborSampler

CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="no CUDA device here (torch.cuda.is_available() is False)")


class RecordingPlan:
    """A device plan whose device is the CPU: pinning and copying clone, and every call is
    recorded as ``(what, thread name, inside the side stream)``."""

    device = torch.device("cpu")

    def __init__(self) -> None:
        self.log: list[tuple[str, str, bool]] = []
        self.made: dict[int, torch.Tensor] = {}  # id -> every "device" tensor (kept alive)
        self._side = threading.local()

    def _note(self, what: str) -> None:
        self.log.append((what, threading.current_thread().name,
                         getattr(self._side, "on", False)))

    def pin(self, t):
        self._note("pin")
        return t.clone()

    def copy(self, t):
        self._note("copy")
        out = t.clone()
        self.made[id(out)] = out
        return out

    @contextmanager
    def side(self):
        self._side.on = True
        try:
            yield
        finally:
            self._side.on = False

    def record(self):
        self._note("record")
        return object()

    def wait(self, event, tensors):
        self._note("wait")
        assert all(id(t) in self.made for t in tensors)

    def keep(self, rows):
        self._note("keep")
        out = torch.from_numpy(rows.copy())
        self.made[id(out)] = out
        return out

    def is_made(self, t) -> bool:
        return self.made.get(id(t)) is t


def _tensors(x) -> list:
    found = []
    map_tensors(x, lambda t: found.append(t) or t)
    return found


def _signature(blocks):
    return [(b.srcdata[NID].cpu().tolist(), [s.cpu().tolist() for s in b.edges()])
            for b in blocks]


def _node_loader(g, ids, prefetch, **kw):
    """The same shuffled node loader, on the CPU or (``device=``) moved."""
    return DistNodeDataLoader(g, ids, NeighborSampler([3, 4], seed=2), batch_size=40,
                              shuffle=True, seed=1, num_samplers=0, prefetch=prefetch,
                              queue_size=1, **kw)


@pytest.mark.unit
def test_the_trainers_device_and_its_backend(monkeypatch):
    import runtime as dg
    from runtime.context import get_context
    from runtime.env import RuntimeEnv

    assert dg.device("cpu") == torch.device("cpu") and dg.ddp_backend("cpu") == "gloo"
    assert dg.device(torch.device("cuda:3")) == torch.device("cuda:3")
    env = RuntimeEnv(role="trainer", job_id="j", token="t", machine_id=0, ip_config="i",
                     part_config="p", device="cuda:1")
    monkeypatch.setattr(get_context(), "env", env)
    if torch.cuda.is_available():
        assert dg.device() == torch.device("cuda:1"), "the launcher's choice"
        assert dg.device("cuda") == torch.device("cuda:1")
    else:
        with pytest.raises(DistError, match=r"the launcher gave this trainer cuda:1 "
                                            r"\(gpus_per_host / --num-gpus\), but torch here "
                                            "sees no CUDA device"):
            dg.device()
    assert dg.ddp_backend("cuda:1") == "nccl"
    import dataclasses

    monkeypatch.setattr(get_context(), "env", dataclasses.replace(env, shared_gpu=True))
    assert dg.ddp_backend("cuda:1") == "gloo", "NCCL refuses two ranks on one GPU"
    monkeypatch.setattr(get_context(), "env", dataclasses.replace(env, device="cpu"))
    assert dg.device() == torch.device("cpu") and dg.ddp_backend() == "gloo"
    monkeypatch.setattr(get_context(), "env", None)  # standalone
    if not torch.cuda.is_available():
        assert dg.device() == torch.device("cpu")
        with pytest.raises(DistError, match="device 'cuda' was asked for, but torch sees no "
                                            "CUDA device"):
            dg.device("cuda")
        with pytest.raises(ValueError, match="torch sees no CUDA device"):
            plan_for("cuda")
    assert plan_for(None) is None and plan_for("cpu") is None
    with pytest.raises(ValueError, match="copy batches to CPU or CUDA devices"):
        plan_for("meta")


@pytest.mark.unit
def test_a_batch_is_pinned_then_copied_on_the_side_stream(standalone):
    import runtime as dg

    dg.DistGraph("g", part_config=str(standalone))
    blocks = NeighborSampler([3, 4], seed=1).sample_blocks(torch.arange(0, 60, 3))
    batch = (blocks[0].srcdata[NID], blocks[-1].dstdata[NID], blocks)
    plan = RecordingPlan()
    moved = DeviceCopier(plan).start(batch, {("feat", ("src", "_N")): np.ones((5, 2))})
    n = len(_tensors(batch)) + 1  # every tensor of the batch, and the rows pulled ahead
    assert [w for w, _, _ in plan.log] == ["pin", "copy"] * n + ["record"]
    assert all(side for w, _, side in plan.log), "pins, copies and the event: on the side stream"
    got, ready = DeviceCopier(plan).finish(moved)
    assert plan.log[-1][0] == "wait"
    assert all(plan.is_made(t) for t in _tensors(got)) and plan.is_made(ready[("feat", ("src", "_N"))])
    assert _signature(got[2]) == _signature(blocks)
    assert got[2][0].dstdata[NID].data_ptr() == got[2][0].srcdata[NID].data_ptr(), \
        "destination ids stay the first source ids (one copy)"


@pytest.mark.multiprocess
@pytest.mark.parametrize("prefetch", [True, False])
def test_a_loader_yields_its_batches_on_the_device(standalone, prefetch):
    """The device batches are the CPU loader's, every tensor moved; with prefetch the copies
    are issued on the prefetch thread and only waited for on the trainer's; the feature rows
    pulled ahead arrive on the device too, without a read in the step."""
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    feat = g.ndata["feat"]
    ids = np.arange(0, g.num_nodes(), 2)

    def loader(**kw):
        return _node_loader(g, ids, prefetch, **kw)

    cpu = [(i.tolist(), o.tolist(), _signature(b)) for i, o, b in loader()]
    plan = RecordingPlan()
    on_device = loader(device=plan)
    assert on_device.device == plan.device
    seen, taken = [], 0
    for input_nodes, seeds, blocks in on_device:
        assert all(plan.is_made(t) for t in _tensors((input_nodes, seeds, blocks)))
        x = feat[input_nodes]
        np.testing.assert_array_equal(x.numpy(), feat.read_rows(input_nodes))
        taken += plan.is_made(x)
        seen.append((input_nodes.tolist(), seeds.tolist(), _signature(blocks)))
    assert seen == cpu
    assert on_device.copy_time > 0 and loader().copy_time == 0.0, "copies are timed"
    copies = {t for w, t, _ in plan.log if w == "copy"}
    waits = {t for w, t, _ in plan.log if w == "wait"}
    assert copies == ({"dglctl-prefetch"} if prefetch else {"MainThread"})
    assert waits == {"MainThread"}
    # With prefetch, the step's read is learnt on the first batch, pulled ahead and copied
    # for the next ones (queue_size 1: up to 3 were made before it was learnt).
    assert taken >= len(seen) - 3 if prefetch else taken == 0


@pytest.mark.multiprocess
@pytest.mark.parametrize("kind", ["recorded", pytest.param("cuda", marks=CUDA)])
def test_a_gpu_loaders_feature_cache_lives_on_the_device(trainer, monkeypatch, kind):
    """With feature_cache_gb, a loader on a device keeps the copies of other machines' rows
    there (made by its plan, on the prefetch thread) and puts the hits into each batch's rows
    after their copy: the same features as the CPU loader's, with hits counted. (A recorded
    "device" here; on CUDA where there is one.)"""
    monkeypatch.setenv("DGLCTL_FEATURE_CACHE_GB", "0.001")
    g = trainer.DistGraph("g")
    feat = g.ndata["feat"]
    ids = np.arange(0, g.num_nodes(), 2)

    def epochs(loader, read):
        return [(i.tolist(), read(i).tolist()) for _ in range(6) for i, _, _ in loader]

    # The CPU loader's rows read outright (read_rows: nothing learnt, so no cache made).
    cpu = epochs(_node_loader(g, ids, True), feat.read_rows)
    assert feat.cache_stats() is None
    plan = RecordingPlan() if kind == "recorded" else None
    on_device = _node_loader(g, ids, True, device=plan or "cuda")
    assert epochs(on_device, lambda i: feat[i].cpu().numpy()) == cpu
    stats = feat.cache_stats()
    assert stats is not None and stats.hits > 0, stats
    cache = feat.store._caches[feat.kvstore_key]
    assert cache.rows
    if plan is not None:
        assert ("keep", "dglctl-prefetch", False) in plan.log
        assert all(plan.is_made(r) for r in cache.rows.values())
    else:
        assert all(r.is_cuda for r in cache.rows.values())


@pytest.mark.unit
def test_bare_id_batches_move_too():
    plan = RecordingPlan()
    batches = list(DistDataLoader(np.arange(10), 4, num_samplers=0, device=plan))
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert all(plan.is_made(b) for b in batches)


@CUDA
@pytest.mark.multiprocess
def test_a_loader_yields_its_batches_on_a_gpu(standalone):
    """The real path: pinned copies on a CUDA side stream, the batches on the GPU, equal to
    the CPU loader's; the rows pulled ahead are on the GPU too."""
    import runtime as dg

    g = dg.DistGraph("g", part_config=str(standalone))
    feat = g.ndata["feat"]
    ids = np.arange(0, g.num_nodes(), 2)

    def loader(**kw):
        return _node_loader(g, ids, True, **kw)

    cpu = [(i.tolist(), _signature(b), feat[i].numpy()) for i, _, b in loader()]
    gpu = loader(device="cuda")
    assert isinstance(gpu._copier.plan, CudaPlan)
    for (i, sig, x), (input_nodes, _, blocks) in zip(cpu, gpu, strict=True):
        assert input_nodes.is_cuda and all(t.is_cuda for t in _tensors(blocks))
        rows = feat[input_nodes]
        assert rows.is_cuda
        np.testing.assert_array_equal(rows.cpu().numpy(), x)
        assert input_nodes.tolist() == i and _signature(blocks) == sig


@pytest.mark.unit
def test_edge_batches_move_with_their_pair_graphs(standalone):
    """An edge loader's batch (input nodes, positive and negative pair graphs, blocks) is moved
    whole, each pair graph's edges and edge ids with it; DGL's DataLoader options are taken."""
    import runtime as dg
    from runtime.loader.edge_dataloader import DistEdgeDataLoader

    g = dg.DistGraph("g", part_config=str(standalone))
    eids = np.arange(0, g.num_edges(), 7)

    def loader(**kw):
        return DistEdgeDataLoader(g, eids, NeighborSampler([3], seed=5), batch_size=64,
                                  negative_sampler=2, num_samplers=0, seed=3, **kw)

    plan = RecordingPlan()
    moved = loader(device=plan, use_uva=True, use_alternate_streams=True,
                   pin_prefetcher=True, persistent_workers=True, use_prefetch_thread=False)
    assert not moved.prefetch, "use_prefetch_thread=False is prefetch=False"
    n = 0
    for (i, pos, neg, blocks), (ci, cpos, cneg, cblocks) in zip(moved, loader(), strict=True):
        assert all(plan.is_made(t) for t in _tensors((i, pos, neg, blocks)))
        assert i.tolist() == ci.tolist() and _signature(blocks) == _signature(cblocks)
        for a, b in ((pos, cpos), (neg, cneg)):
            assert [t.tolist() for t in a.edges()] == [t.tolist() for t in b.edges()]
        assert pos.edata["_ID"].tolist() == cpos.edata["_ID"].tolist()
        n += 1
    assert n == len(moved) > 1
