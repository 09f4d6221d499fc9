"""``DistEmbedding``: a learnable embedding table stored as a DistTensor, trained sparsely."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .dist_tensor import DistTensor


def _uniform_init(shape: tuple[int, ...], dtype: Any) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype).uniform_(-1.0, 1.0)


class DistEmbedding:
    """DGL's ``DistEmbedding(num_embeddings, embedding_dim, name, init_func, part_policy)``.

    Calling it with ids pulls their rows (a tensor that requires grad) and records them; a
    sparse optimizer (``runtime.optim.SparseAdagrad`` / ``SparseAdam``) then sends each row's
    gradient to the machine that owns the row, which applies the update there.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        name: str | None = None,
        init_func: Callable[[tuple[int, ...], Any], torch.Tensor] | None = None,
        part_policy: str | None = None,
    ) -> None:
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = DistTensor((num_embeddings, embedding_dim), torch.float32, name=name,
                                 init_func=init_func or _uniform_init, part_policy=part_policy,
                                 persistent=True)
        self.name = self.weight.name
        self._trace: list[tuple[np.ndarray, torch.Tensor]] = []
        self.training = True

    def __call__(self, ids: Any) -> torch.Tensor:
        ids_np = np.asarray(torch.as_tensor(ids).numpy(), np.int64).reshape(-1)
        rows = self.weight[ids_np]
        if self.training and torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._trace.append((ids_np, rows))
        return rows

    def train(self, mode: bool = True) -> DistEmbedding:
        self.training = mode
        return self

    def eval(self) -> DistEmbedding:
        return self.train(False)

    def reset_trace(self) -> None:
        self._trace = []
