"""Sparse optimizers for ``DistEmbedding``: SparseAdagrad and SparseAdam (DGL's, same semantics).

``step()`` is collective, as DGL's: every trainer calls it (with or without gradients); the
gradients of each row from every trainer are combined and the row is updated once, from
their mean (DGL's all-to-all then ``update``). Here each machine's main server gathers the
gradients of its rows and applies the step (one applier per machine: no step is lost). State
lives in DistTensors beside the table, under DGL's names (``NAME_sum``; ``NAME_step``,
``NAME_mem``, ``NAME_power``). ``save(path)`` / ``load(path)`` write and read each trainer's
share of the state, as DGL's (``path_RANK``, one file per trainer).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import torch

from .dist_tensor import DistTensor
from .embedding import DistEmbedding
from .env import torch_rank_world
from .errors import DistError
from .split import trainer_share


class DistSparseGradOptimizer:
    """DGL's base class: ``step``, ``zero_grad``, ``save``, ``load``, ``local_state_dict``."""

    kind = ""
    state_names: tuple[str, ...] = ()

    def __init__(self, params: list[DistEmbedding], lr: float) -> None:
        self._params = list(params)
        self._lr = lr
        self._rank, self._world_size = torch_rank_world()
        self._state: dict[str, Any] = {}
        self._defaults: dict[str, Any] = {}
        self._steps = 0
        for emb in self._params:
            if not isinstance(emb, DistEmbedding):
                raise DistError(f"{type(self).__name__} only supports DistEmbedding, got "
                                f"{type(emb).__name__}")
            if emb.name in self._state:
                raise DistError(f"{emb.name!r} already registered in the optimizer")
            states = tuple(
                DistTensor((emb.num_embeddings,) if s == "step" else
                           (emb.num_embeddings, emb.embedding_dim), torch.float32,
                           f"{emb.name}_{s}", part_policy=emb.weight.part_policy)
                for s in self.state_names)
            self._state[emb.name] = states[0] if len(states) == 1 else states

    @property
    def params(self) -> list[DistEmbedding]:
        return self._params

    def _hyper(self) -> dict[str, float]:
        return {"lr": self._lr}

    def _states(self, emb: DistEmbedding) -> list[DistTensor]:
        s = self._state[emb.name]
        return list(s) if isinstance(s, tuple) else [s]

    def zero_grad(self) -> None:
        """Nothing to clear: ``step`` forgets each gradient once applied. (The rows of the
        current forward pass must survive this call: the usual order is forward,
        ``zero_grad``, ``backward``, ``step``.)"""

    def step(self) -> None:
        """Apply every trainer's gradients recorded since the last step (collective: every
        trainer calls it, with or without gradients), then forget them."""
        self._steps += 1
        with torch.no_grad():
            for emb in self._params:
                grads = [(ids, rows.grad) for ids, rows in emb.trace if rows.grad is not None]
                ids = np.concatenate([g[0] for g in grads]) if grads else np.empty(0, np.int64)
                values = (torch.cat([g[1] for g in grads]).cpu().numpy() if grads
                          else np.empty((0, emb.embedding_dim), np.float32))
                w = emb.weight
                w.store.sparse_update(self.kind, w.name, [s.name for s in self._states(emb)],
                                      w.part_policy.key, ids, values, self._hyper(),
                                      step=f"{w.name}:{self.kind}:{self._steps}")
                emb.reset_trace()

    # --- checkpoints (DGL's format: one file per trainer, ``path_RANK``) ------------------
    def local_state_dict(self) -> dict[str, Any]:
        """This trainer's share of the state: per embedding, the ids of the rows this machine
        owns (split among its trainers by ``id % trainers``) and each state's rows."""
        out: dict[str, Any] = {"emb_states": {}, "params": {"world_size": self._world_size,
                                                            **self._defaults}}
        for emb in self._params:
            idx = trainer_share(emb.weight, self._rank)  # the rule checkpoints use too
            out["emb_states"][emb.name] = {
                "ids": torch.from_numpy(idx),
                "states": {s.name: s[idx] for s in self._states(emb)}}
        return out

    def load_local_state_dict(self, local_state_dict: dict[str, Any]) -> None:
        """Write a ``local_state_dict`` back into the state and take its hyper-parameters."""
        for emb_name, saved in local_state_dict["emb_states"].items():
            states = {s.name: s for s in self._states(self._by_name(emb_name))}
            if len(saved["states"]) != len(states):
                raise DistError(f"the saved state of {emb_name!r} has {len(saved['states'])} "
                                f"tensors, this optimizer {len(states)}")
            for name, rows in saved["states"].items():
                if name not in states:
                    raise DistError(f"the saved state {name!r} is not one of this optimizer's "
                                    f"({sorted(states)})")
                states[name][saved["ids"]] = rows.to(torch.float32)
        params = dict(local_state_dict["params"])
        params.pop("world_size", None)
        self._defaults.update(params)
        self.__dict__.update(params)

    def _by_name(self, name: str) -> DistEmbedding:
        for emb in self._params:
            if emb.name == name:
                return emb
        raise DistError(f"the saved state holds embedding {name!r}, which this optimizer "
                        f"does not train ({[e.name for e in self._params]})")

    def _barrier(self) -> None:
        if self._params:
            self._params[0].weight.store.barrier()

    def save(self, f: str | os.PathLike) -> None:
        """Write this trainer's share of the state to ``f_RANK`` (every trainer calls it)."""
        self._barrier()
        torch.save(self.local_state_dict(), f"{os.fspath(f)}_{self._rank}")
        self._barrier()

    def load(self, f: str | os.PathLike) -> None:
        """Read ``f_RANK`` (and, with fewer trainers than when saved, the files of the ranks
        gone: ``f_{RANK + k*world}``); a missing file is a warning, as DGL's."""
        self._barrier()
        path = f"{os.fspath(f)}_{self._rank}"
        if not os.path.exists(path):
            warnings.warn(f"File {path} can't be found, load nothing.", stacklevel=2)
        else:
            old_world = self._load_from(path)
            for rank in range(self._rank + self._world_size, old_world, self._world_size):
                self._load_from(f"{os.fspath(f)}_{rank}")
        self._barrier()

    def _load_from(self, path: str) -> int:
        state = torch.load(path, weights_only=True)  # tensors and numbers only: no code
        world = int(state["params"].get("world_size", 1))
        self.load_local_state_dict(state)
        return world


class SparseAdagrad(DistSparseGradOptimizer):
    """Adagrad on embedding rows: ``sum += g^2; w -= lr * g / (sqrt(sum) + eps)``."""

    kind = "adagrad"
    state_names = ("sum",)

    def __init__(self, params: list[DistEmbedding], lr: float, eps: float = 1e-10) -> None:
        super().__init__(params, lr)
        self._eps = eps
        self._defaults = {"_lr": lr, "_eps": eps}

    def _hyper(self) -> dict[str, float]:
        return {"lr": self._lr, "eps": self._eps}


class SparseAdam(DistSparseGradOptimizer):
    """Adam on embedding rows, with a per-row step count (rows are updated at different times)."""

    kind = "adam"
    state_names = ("step", "mem", "power")

    def __init__(self, params: list[DistEmbedding], lr: float, betas=(0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr)
        self._eps, self._beta1, self._beta2 = eps, betas[0], betas[1]
        self._defaults = {"_lr": lr, "_eps": eps, "_beta1": betas[0], "_beta2": betas[1]}

    def _hyper(self) -> dict[str, float]:
        return {"lr": self._lr, "eps": self._eps, "beta1": self._beta1, "beta2": self._beta2}
