"""``DistEmbedding``: a learnable embedding table stored as a DistTensor, trained sparsely."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .dist_tensor import DistTensor
from .view import PartitionPolicy


class DistEmbedding:
    """DGL's ``DistEmbedding(num_embeddings, embedding_dim, name, init_func, part_policy)``.

    Rows start at zero unless ``init_func(shape, dtype)`` says otherwise (as DGL's). Calling it
    with ids pulls their rows (a tensor that requires grad while autograd records) and traces
    them; a sparse optimizer (``runtime.optim.SparseAdagrad`` / ``SparseAdam``) then applies
    every trainer's gradients of those rows in one collective ``step``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        name: str | None = None,
        init_func: Callable[[tuple[int, ...], Any], torch.Tensor] | None = None,
        part_policy: Any = None,
    ) -> None:
        self._num_embeddings = int(num_embeddings)
        self._embedding_dim = int(embedding_dim)
        self._tensor = DistTensor((num_embeddings, embedding_dim), torch.float32, name=name,
                                  init_func=init_func, part_policy=part_policy)
        self._part_policy = part_policy
        self._trace: list[tuple[np.ndarray, torch.Tensor]] = []
        self.training = True

    @property
    def weight(self) -> DistTensor:
        """The DistTensor holding the rows."""
        return self._tensor

    @property
    def name(self) -> str:
        """The name the embedding was given (DGL's ``tensor_name``)."""
        return self._tensor.tensor_name

    @property
    def data_name(self) -> str:
        """The key of its rows in the job (``"TYPE/name"``)."""
        return self._tensor.name

    @property
    def part_policy(self) -> PartitionPolicy:
        return self._tensor.part_policy

    @property
    def num_embeddings(self) -> int:
        return self._num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self._embedding_dim

    def __call__(self, ids: Any, device: Any = None) -> torch.Tensor:
        """The rows of ``ids``, on ``device`` (default: the ids' device, as a batch on a
        GPU gives them; the CPU for anything else)."""
        ids_t = torch.as_tensor(ids)
        ids_np = np.asarray(ids_t.cpu().numpy(), np.int64).reshape(-1)
        rows = self._tensor[ids_np]
        if device is None and ids_t.device.type != "cpu":
            device = ids_t.device
        if device is not None:
            rows = rows.to(device)
        if self.training and torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._trace.append((ids_np, rows))
        return rows

    def train(self, mode: bool = True) -> DistEmbedding:
        self.training = mode
        return self

    def eval(self) -> DistEmbedding:
        return self.train(False)

    @property
    def trace(self) -> list[tuple[np.ndarray, torch.Tensor]]:
        """``(ids, rows)`` of each lookup since the last step (the rows hold their
        gradients once backward has run): what a sparse optimizer applies."""
        return self._trace

    def reset_trace(self) -> None:
        """Forget the rows looked up since the last step."""
        self._trace = []
