"""DGL's node_split / edge_split tests, ported, plus the split by trainer id.

``test_split`` and ``test_split_even`` are ported from dmlc/dgl
tests/distributed/test_dist_graph_store.py at v1.1.3
(commit 6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). Every check keeps its meaning; what changed:

- Graphs: DGL's ``create_random_graph(10000)`` and ``create_random_hetero()`` (the same scipy
  draws) are built as ``partitioner.graph.Graph``s (``_partition_util``) with 3000 instead of
  10000 nodes per type: scipy's ``random`` alone takes ~8 s per 10000 x 10000 draw on the
  2-core CI, and the checks (every selected id once, on its owner) do not depend on size.
- DGL's ``set_roles(num_clients)`` (which patches ``dgl.distributed.role``) becomes the
  ``WORLD_SIZE`` variable, which ``node_split`` reads when torch.distributed is not set up.
- A part's inner node / edge ids come from the public ``partitioner.loader.Partition``
  (``local_nids[inner_node]``, ``local_graph()``'s inner edge ids) instead of the DGLGraph's
  ``ndata[dgl.NID]`` / ``ndata["inner_node"]`` / ``edata``.
- Masks come from a seeded generator (DGL's are unseeded); each graph is partitioned once
  per module into a temporary folder (DGL re-partitions into ``/tmp/dist_graph`` per case,
  the same partition each time).

``test_split_by_trainer_id`` is not from DGL's file: it checks ``node_trainer_ids=`` /
``edge_trainer_ids=`` (DGL's ``_split_by_trainer_id``) on a partition written with
``num_trainers_per_machine=2``, in process.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from partitioner import load_partition, load_partition_book, partition_graph
from runtime.split import edge_split, node_split
from tests.compat._partition_util import STORE_HETERO, create_random_graph, create_random_hetero

pytestmark = pytest.mark.unit

N = 3000  # DGL: 10000
# DGL's store hetero graph, node counts / 10000 * 3000 (3000, 3010, 3020).
SMALL_HETERO = ({t: n - 7000 for t, n in STORE_HETERO[0].items()}, STORE_HETERO[1])


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory):
    """One 4-part METIS partition (2 hops) per graph, shared by the mask cases (as each of
    DGL's runs makes the same one): graph -> (graph, part config path)."""
    cache = {}

    def get(hetero):
        if hetero not in cache:
            g = create_random_hetero(SMALL_HETERO) if hetero else create_random_graph(N)
            out = tmp_path_factory.mktemp("hetero" if hetero else "homo")
            partition_graph(g, "dist_graph_test", 4, out, num_hops=2, part_method="metis")
            cache[hetero] = g, out / "dist_graph_test.json"
        return cache[hetero]

    return get


def _inner(cfg_path, i):
    part = load_partition(cfg_path, i)
    _, _, eids, inner = part.local_graph()
    return part.local_nids[part.inner_node], eids[inner]


@pytest.mark.parametrize("hetero", [True, False])
@pytest.mark.parametrize("empty_mask", [True, False])
def test_split(partitioned, monkeypatch, hetero, empty_mask):
    g, cfg_path = partitioned(hetero)
    if hetero:
        ntype, etype = "n1", "r1"
        num_n, num_e = g.num_nodes[ntype], g.num_edges(("n1", "r1", "n2"))
    else:
        ntype, etype = "_N", "_E"
        num_n, num_e = g.total_nodes, g.total_edges
    num_parts = 4
    rng = np.random.default_rng(0)
    mask_thd = 100 if empty_mask else 30
    node_mask = rng.integers(0, 100, size=num_n) > mask_thd
    edge_mask = rng.integers(0, 100, size=num_e) > mask_thd
    selected_nodes = np.nonzero(node_mask)[0]
    selected_edges = np.nonzero(edge_mask)[0]

    for i in range(num_parts):
        monkeypatch.setenv("WORLD_SIZE", str(num_parts))
        gpb = load_partition_book(cfg_path, i)[0]
        local_nids, local_eids = _inner(cfg_path, i)
        if hetero:
            ntype_ids, nids = gpb.map_to_per_ntype(torch.from_numpy(local_nids))
            local_nids = nids.numpy()[ntype_ids.numpy() == 0]
        nodes1 = np.intersect1d(selected_nodes, local_nids)
        nodes2 = node_split(node_mask, gpb, ntype=ntype, rank=i, force_even=False)
        assert np.all(np.sort(nodes1) == np.sort(nodes2.numpy()))
        assert np.all(np.isin(nodes2.numpy(), local_nids))

        monkeypatch.setenv("WORLD_SIZE", str(num_parts * 2))
        nodes3 = node_split(node_mask, gpb, ntype=ntype, rank=i * 2, force_even=False)
        nodes4 = node_split(node_mask, gpb, ntype=ntype, rank=i * 2 + 1, force_even=False)
        nodes5 = torch.cat([nodes3, nodes4], 0)
        assert np.all(np.sort(nodes1) == np.sort(nodes5.numpy()))

        monkeypatch.setenv("WORLD_SIZE", str(num_parts))
        if hetero:
            etype_ids, eids = gpb.map_to_per_etype(torch.from_numpy(local_eids))
            local_eids = eids.numpy()[etype_ids.numpy() == 0]
        edges1 = np.intersect1d(selected_edges, local_eids)
        edges2 = edge_split(edge_mask, gpb, etype=etype, rank=i, force_even=False)
        assert np.all(np.sort(edges1) == np.sort(edges2.numpy()))
        assert np.all(np.isin(edges2.numpy(), local_eids))

        monkeypatch.setenv("WORLD_SIZE", str(num_parts * 2))
        edges3 = edge_split(edge_mask, gpb, etype=etype, rank=i * 2, force_even=False)
        edges4 = edge_split(edge_mask, gpb, etype=etype, rank=i * 2 + 1, force_even=False)
        edges5 = torch.cat([edges3, edges4], 0)
        assert np.all(np.sort(edges1) == np.sort(edges5.numpy()))


@pytest.mark.parametrize("empty_mask", [True, False])
def test_split_even(partitioned, monkeypatch, empty_mask):
    g, cfg_path = partitioned(False)
    num_parts = 4
    rng = np.random.default_rng(0)
    mask_thd = 100 if empty_mask else 30
    node_mask = rng.integers(0, 100, size=g.total_nodes) > mask_thd
    edge_mask = rng.integers(0, 100, size=g.total_edges) > mask_thd
    all_nodes1, all_nodes2, all_edges1, all_edges2 = [], [], [], []
    for i in range(num_parts):
        monkeypatch.setenv("WORLD_SIZE", str(num_parts))
        gpb = load_partition_book(cfg_path, i)[0]
        nodes = node_split(node_mask, gpb, rank=i, force_even=True)
        assert nodes.dtype == torch.int64
        all_nodes1.append(nodes)
        monkeypatch.setenv("WORLD_SIZE", str(num_parts * 2))
        nodes1 = node_split(node_mask, gpb, rank=i * 2, force_even=True)
        nodes2 = node_split(node_mask, gpb, rank=i * 2 + 1, force_even=True)
        all_nodes2.append(torch.sort(torch.cat([nodes1, nodes2], 0)).values)

        monkeypatch.setenv("WORLD_SIZE", str(num_parts))
        edges = edge_split(edge_mask, gpb, rank=i, force_even=True)
        all_edges1.append(edges)
        monkeypatch.setenv("WORLD_SIZE", str(num_parts * 2))
        edges1 = edge_split(edge_mask, gpb, rank=i * 2, force_even=True)
        edges2 = edge_split(edge_mask, gpb, rank=i * 2 + 1, force_even=True)
        all_edges2.append(torch.sort(torch.cat([edges1, edges2], 0)).values)
    all_nodes = np.nonzero(node_mask)[0]
    all_edges = np.nonzero(edge_mask)[0]
    assert np.all(all_nodes == torch.cat(all_nodes1, 0).numpy())
    assert np.all(all_edges == torch.cat(all_edges1, 0).numpy())
    assert np.all(all_nodes == torch.cat(all_nodes2, 0).numpy())
    assert np.all(all_edges == torch.cat(all_edges2, 0).numpy())


def test_split_by_trainer_id(tmp_path, monkeypatch):
    g = create_random_graph(2000)
    num_parts, k = 2, 2
    partition_graph(g, "t", num_parts, tmp_path, part_method="metis",
                    num_trainers_per_machine=k)
    cfg_path = tmp_path / "t.json"
    parts = [load_partition(cfg_path, i) for i in range(num_parts)]
    # Parts own consecutive ranges: their trainer ids, in order, cover every id.
    node_tid = torch.from_numpy(np.concatenate([p.node_feats()["_N/trainer_id"] for p in parts]))
    edge_tid = torch.from_numpy(np.concatenate([p.edge_feats()["_N:_E:_N/trainer_id"]
                                                for p in parts]))
    node_mask = torch.from_numpy(np.random.default_rng(1).random(g.total_nodes) < 0.5)
    edge_mask = torch.from_numpy(np.random.default_rng(2).random(g.total_edges) < 0.5)
    monkeypatch.setenv("WORLD_SIZE", str(num_parts * k))
    for mask, tid, split, kw in ((node_mask, node_tid, node_split, "node_trainer_ids"),
                                 (edge_mask, edge_tid, edge_split, "edge_trainer_ids")):
        shares = []
        for rank in range(num_parts * k):
            gpb = load_partition_book(cfg_path, rank // k)[0]
            share = split(mask, gpb, rank=rank, force_even=True, **{kw: tid})
            assert share.dtype == torch.int64
            shares.append(share)
            # Most of a trainer's ids are the ones the partitioner gave it.
            assert (tid[share] == rank).float().mean().item() > 0.8
        sizes = [len(s) for s in shares]
        assert max(sizes) - min(sizes) <= 2
        every = torch.sort(torch.cat(shares)).values
        assert torch.equal(every, torch.nonzero(mask).flatten())
        # Trainer ids for more trainers than run fold onto the ones that run (DGL).
        monkeypatch.setenv("WORLD_SIZE", str(num_parts))
        folded = [split(mask, load_partition_book(cfg_path, r)[0], rank=r, force_even=True,
                        **{kw: tid}) for r in range(num_parts)]
        assert torch.equal(torch.sort(torch.cat(folded)).values, every)
        monkeypatch.setenv("WORLD_SIZE", str(num_parts * k))
