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


def test_duplicate_ids_sum_their_gradients():
    w = np.zeros((3, 2), np.float32)
    acc = np.zeros((3, 2), np.float32)
    apply_update("adagrad", w, [acc], np.array([1, 1, 2]), np.ones((3, 2), np.float32),
                 {"lr": 1.0, "eps": 0.0})
    np.testing.assert_allclose(acc[1], [4.0, 4.0])  # (1 + 1)^2, not 1 + 1
    np.testing.assert_allclose(w[1], [-1.0, -1.0])
    np.testing.assert_allclose(w[0], [0.0, 0.0])
