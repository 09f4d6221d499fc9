"""Encode mini-batches (blocks, tensors, nested lists/dicts) as msgpack + raw frames, no pickle.

Sampler processes send their batches to the trainer this way: the header describes the
structure, each tensor travels as one raw frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import DistError
from ..sampling.block import Block
from ..sampling.graph import PairGraph, SampledGraph


def encode(obj: Any) -> tuple[Any, list[np.ndarray]]:
    """``(tree, arrays)`` for a batch; ``tree`` is plain msgpack-able data."""
    arrays: list[np.ndarray] = []

    def leaf(a: np.ndarray) -> int:
        arrays.append(np.ascontiguousarray(a))
        return len(arrays) - 1

    def walk(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return {"t": "tensor", "i": leaf(x.detach().cpu().numpy())}
        if isinstance(x, np.ndarray):
            return {"t": "nd", "i": leaf(x)}
        if isinstance(x, Block):
            src, num_dst, edges = x.layout()
            return {
                "t": "block",
                "src": {t: leaf(ids.numpy()) for t, ids in src.items()},
                "ndst": num_dst,
                "edges": [[list(et), leaf(s.numpy()), leaf(d.numpy()), leaf(e.numpy())]
                          for et, (s, d, e) in edges.items()],
            }
        if isinstance(x, SampledGraph):
            def data(d: dict) -> dict:
                return {k: leaf(v.detach().cpu().numpy()) for k, v in d.items()}

            num_nodes, gedges, edata, ndata = x.layout()
            return {"t": "graph", "pair": isinstance(x, PairGraph), "n": num_nodes,
                    "nd": {t: data(d) for t, d in ndata.items()},
                    "edges": [[list(et), leaf(s.numpy()), leaf(d.numpy()), data(edata[et])]
                              for et, (s, d) in gedges.items()]}
        if isinstance(x, (list, tuple)):
            return {"t": "list" if isinstance(x, list) else "tuple", "v": [walk(v) for v in x]}
        if isinstance(x, dict):
            keys = list(x)
            return {"t": "dict", "k": [list(k) if isinstance(k, tuple) else k for k in keys],
                    "kt": [isinstance(k, tuple) for k in keys], "v": [walk(x[k]) for k in keys]}
        if x is None or isinstance(x, (bool, int, float, str)):
            return {"t": "py", "v": x}
        raise DistError(f"cannot send a {type(x).__name__} from a sampler process",
                        hint="collate_fn may return tensors, arrays, blocks, lists and dicts")

    return walk(obj), arrays


def decode(tree: Any, arrays: list[np.ndarray]) -> Any:
    """Inverse of :func:`encode` (tensors own their memory: frames are copied once)."""

    def arr(i: int) -> np.ndarray:
        return np.array(arrays[i])

    def walk(x: Any) -> Any:
        kind = x["t"]
        if kind == "tensor":
            return torch.from_numpy(arr(x["i"]))
        if kind == "nd":
            return arr(x["i"])
        if kind == "block":
            edges = {tuple(et): (torch.from_numpy(arr(s)), torch.from_numpy(arr(d)),
                                 torch.from_numpy(arr(e)))
                     for et, s, d, e in x["edges"]}
            return Block({t: torch.from_numpy(arr(i)) for t, i in x["src"].items()},
                         x["ndst"], edges)
        if kind == "graph":
            def data(d: dict) -> dict:
                return {k: torch.from_numpy(arr(i)) for k, i in d.items()}

            out = (PairGraph if x["pair"] else SampledGraph).__new__(
                PairGraph if x["pair"] else SampledGraph)
            SampledGraph.__init__(
                out, x["n"], {tuple(et): (arr(s), arr(d)) for et, s, d, _ in x["edges"]},
                {tuple(et): data(e) for et, _, _, e in x["edges"]},
                {t: data(d) for t, d in x["nd"].items()})
            return out
        if kind in ("list", "tuple"):
            items = [walk(v) for v in x["v"]]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            return {(tuple(k) if kt else k): walk(v)
                    for k, kt, v in zip(x["k"], x["kt"], x["v"], strict=True)}
        return x["v"]

    return walk(tree)
