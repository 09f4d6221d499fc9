"""DistEmbedding with SparseAdam / SparseAdagrad lowers a loss; updates land on the owners."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.store.sparse_update import apply_update

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("opt_name,lr", [("SparseAdam", 0.1), ("SparseAdagrad", 0.5)])
def test_embedding_learns_standalone(standalone, opt_name, lr):
    import runtime as dg
    import runtime.optim as optim
    from runtime.embedding import DistEmbedding

    g = dg.DistGraph("g", part_config=str(standalone))
    emb = DistEmbedding(g.num_nodes(), 4, name=f"emb_{opt_name}")
    opt = getattr(optim, opt_name)([emb], lr=lr)
    target = torch.from_numpy(np.random.default_rng(0).standard_normal((g.num_nodes(), 4))
                              .astype(np.float32))
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(60):
        ids = rng.integers(0, g.num_nodes(), 128)
        loss = ((emb(ids) - target[ids]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])


def test_duplicate_ids_take_the_mean_of_their_gradients():
    """As DGL's update: one update per row per step, from the mean of its gradients."""
    w = np.zeros((3, 2), np.float32)
    acc = np.zeros((3, 2), np.float32)
    apply_update("adagrad", w, [acc], np.array([1, 1, 2]),
                 np.array([[1, 1], [3, 3], [2, 2]], np.float32), {"lr": 1.0, "eps": 0.0})
    np.testing.assert_allclose(acc[1], [4.0, 4.0])  # mean 2, squared
    np.testing.assert_allclose(acc[2], [4.0, 4.0])
    np.testing.assert_allclose(w[1], [-1.0, -1.0])
    np.testing.assert_allclose(w[0], [0.0, 0.0])
    step, mem, power = np.zeros(3, np.float32), np.zeros((3, 2), np.float32), \
        np.zeros((3, 2), np.float32)
    w = np.zeros((3, 2), np.float32)
    apply_update("adam", w, [step, mem, power], np.array([0, 0]), np.ones((2, 2), np.float32),
                 {"lr": 0.1, "eps": 0.0})
    np.testing.assert_allclose(step, [1, 0, 0])
    np.testing.assert_allclose(w[0], [-0.1, -0.1], rtol=1e-5)  # Adam's first step: lr


def test_optimizer_state_under_dgl_names_saved_and_loaded(standalone, tmp_path):
    """DGL's check_dist_optim_store, standalone: states named NAME_sum, save/load per rank."""
    import runtime as dg
    from runtime.embedding import DistEmbedding
    from runtime.optim import SparseAdagrad, SparseAdam

    g = dg.DistGraph("g", part_config=str(standalone))
    n = g.num_nodes()
    emb = DistEmbedding(n, 2, name="ck")
    assert (emb(np.arange(n)).detach().numpy() == 0).all()  # DGL: zeros without init_func
    emb.reset_trace()
    opt = SparseAdagrad([emb], lr=0.1, eps=1e-8)
    state = torch.rand(n, 2)
    opt._state["ck"][np.arange(n)] = state
    opt.save(tmp_path / "opt.pt")
    assert (tmp_path / "opt.pt_0").exists()
    other = SparseAdagrad([emb], lr=0.5, eps=2e-8)  # the same state tensor, by name
    other._state["ck"][np.arange(n)] = torch.zeros(n, 2)
    other.load(tmp_path / "opt.pt")
    torch.testing.assert_close(other._state["ck"][np.arange(n)], state, rtol=0, atol=0)
    assert other._lr == 0.1 and other._eps == 1e-8
    adam = SparseAdam([DistEmbedding(n, 2, name="ad")], lr=0.1)
    assert [t.tensor_name for t in adam._state["ad"]] == ["ad_step", "ad_mem", "ad_power"]
    assert adam._state["ad"][0].shape == (n,)
