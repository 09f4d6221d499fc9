"""Sparse optimizers for ``DistEmbedding``: SparseAdagrad and SparseAdam (DGL's names).

State (Adagrad's sum of squares; Adam's moments and per-row step) lives in DistTensors next to
the embedding rows, and every update is applied by the machine that owns the row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .dist_tensor import DistTensor
from .embedding import DistEmbedding


class _SparseOptimizer:
    kind = ""
    num_states = 0

    def __init__(self, params: list[DistEmbedding], lr: float, **hyper: Any) -> None:
        self.params = list(params)
        self.lr = lr
        self.hyper = hyper
        self._states: dict[str, list[str]] = {}
        for emb in self.params:
            names = []
            for k in range(self.num_states):
                shape = (emb.num_embeddings, 1 if self._row_state(k) else emb.embedding_dim)
                state = DistTensor(shape, torch.float32, name=f"{emb.name}:{self.kind}:{k}",
                                   part_policy=emb.weight.part_policy, persistent=True)
                names.append(state.name)
            self._states[emb.name] = names

    def _row_state(self, k: int) -> bool:
        return False

    def zero_grad(self) -> None:
        """Nothing to clear: ``step`` forgets each gradient once applied. (The rows of the
        current forward pass must survive this call: the usual order is forward,
        ``zero_grad``, ``backward``, ``step``.)"""

    def step(self) -> None:
        """Apply the gradients recorded since the last step, then forget them."""
        params = {"lr": self.lr, **self.hyper}
        for emb in self.params:
            grads = [(ids, rows.grad) for ids, rows in emb._trace if rows.grad is not None]
            if grads:
                ids = np.concatenate([g[0] for g in grads])
                values = torch.cat([g[1] for g in grads]).numpy()
                emb.weight._graph.sparse_update(self.kind, emb.name, self._states[emb.name],
                                                emb.weight.part_policy, ids, values, params)
            emb.reset_trace()


class SparseAdagrad(_SparseOptimizer):
    """Adagrad on embedding rows: ``w -= lr * g / (sqrt(sum g^2) + eps)``."""

    kind = "adagrad"
    num_states = 1

    def __init__(self, params: list[DistEmbedding], lr: float, eps: float = 1e-10) -> None:
        super().__init__(params, lr, eps=eps)


class SparseAdam(_SparseOptimizer):
    """Adam on embedding rows, with a per-row step count (rows are updated at different times)."""

    kind = "adam"
    num_states = 3

    def __init__(self, params: list[DistEmbedding], lr: float, betas=(0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr, beta1=betas[0], beta2=betas[1], eps=eps)

    def _row_state(self, k: int) -> bool:
        return k == 2  # the step count: one value per row
