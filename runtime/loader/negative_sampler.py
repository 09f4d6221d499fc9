"""DGL's ``dgl.dataloading.negative_sampler``: ``Uniform(k)``, ``k`` corrupted edges per edge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

CanonicalEtype = tuple[str, str, str]


def canonical_etype(g: Any, etype: Any) -> CanonicalEtype:
    """The canonical edge type of ``g`` named ``etype`` (a name, ``"s:e:d"`` or a triple)."""
    for c in g.canonical_etypes:
        if etype in (c, c[1], ":".join(c)):
            return c
    raise KeyError(f"edge type {etype!r} not in {g.canonical_etypes}")


class Uniform:
    """DGL's ``negative_sampler.Uniform(k)``: for each edge ``(u, v)``, ``k`` edges ``(u, v')``
    with ``v'`` uniform over the nodes of the edge type's destination type.

    ``sampler(g, eids)`` returns ``(src, dst)``, or ``{etype: (src, dst)}`` for a dict of
    edge ids, as DGL's. The loaders pass ``rng`` (a numpy Generator keyed by the batch), so a
    batch draws the same negatives in a sampler process and in the trainer; without it the
    draws come from torch's global generator, as DGL's.
    """

    def __init__(self, k: int) -> None:
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = int(k)

    def __call__(self, g: Any, eids: Any, rng: np.random.Generator | None = None) -> Any:
        if isinstance(eids, Mapping):
            return {canonical_etype(g, et): self._generate(g, v, canonical_etype(g, et), rng)
                    for et, v in eids.items()}
        return self._generate(g, eids, g.canonical_etypes[0], rng)

    def _generate(self, g: Any, eids: Any, etype: CanonicalEtype,
                  rng: np.random.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        eids = torch.as_tensor(eids, dtype=torch.int64)
        src, _ = g.find_edges(eids, etype=etype)
        src = torch.repeat_interleave(torch.as_tensor(src), self.k)
        n, total = g.num_nodes(etype[2]), len(eids) * self.k
        if rng is None:
            dst = torch.randint(0, n, (total,), dtype=torch.int64)
        else:
            dst = torch.from_numpy(rng.integers(0, n, total, dtype=np.int64))
        return src, dst
