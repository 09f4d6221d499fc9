"""DGL's built-in edge functions (``dgl.function``) for ``apply_edges`` on sampled graphs and
pair graphs: ``u_dot_v``, ``u_add_v``, ``e_mul_u``, ... and ``copy_u`` / ``copy_e``.

Each is a callable of an ``EdgeBatch`` returning ``{out: tensor}``, so ``g.apply_edges`` treats
it as any user function. ``x_dot_y`` keeps a last dimension of 1, as DGL's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
        "dot": lambda a, b: (a * b).sum(-1, keepdim=True)}


def _side(edges: Any, which: str) -> Any:
    return {"u": edges.src, "v": edges.dst, "e": edges.data}[which]


class BinaryEdgeFunction:
    """``{lhs}_{op}_{rhs}(lhs_field, rhs_field, out)``: ``op`` of a field of each edge's
    source (u), destination (v) or the edge itself (e)."""

    def __init__(self, lhs: str, op: str, rhs: str, lhs_field: str, rhs_field: str,
                 out: str) -> None:
        self.lhs, self.op, self.rhs = lhs, op, rhs
        self.lhs_field, self.rhs_field, self.out = lhs_field, rhs_field, out

    def __call__(self, edges: Any) -> dict[str, torch.Tensor]:
        a = _side(edges, self.lhs)[self.lhs_field]
        b = _side(edges, self.rhs)[self.rhs_field]
        return {self.out: _OPS[self.op](a, b)}

    def __repr__(self) -> str:
        return (f"{self.lhs}_{self.op}_{self.rhs}({self.lhs_field!r}, {self.rhs_field!r}, "
                f"{self.out!r})")


class CopyEdgeFunction:
    """``copy_u(field, out)`` / ``copy_e(field, out)``: a field of the source / the edge."""

    def __init__(self, side: str, field: str, out: str) -> None:
        self.side, self.field, self.out = side, field, out

    def __call__(self, edges: Any) -> dict[str, torch.Tensor]:
        return {self.out: _side(edges, self.side)[self.field]}


def copy_u(u: str, out: str) -> CopyEdgeFunction:
    """DGL's ``copy_u``: the source's field ``u`` as edge field ``out``."""
    return CopyEdgeFunction("u", u, out)


def copy_e(e: str, out: str) -> CopyEdgeFunction:
    """DGL's ``copy_e``: edge field ``e`` as edge field ``out``."""
    return CopyEdgeFunction("e", e, out)


copy_src = copy_u
copy_edge = copy_e


def _make(lhs: str, op: str, rhs: str) -> Any:
    def builtin(lhs_field: str, rhs_field: str, out: str) -> BinaryEdgeFunction:
        return BinaryEdgeFunction(lhs, op, rhs, lhs_field, rhs_field, out)

    builtin.__name__ = builtin.__qualname__ = f"{lhs}_{op}_{rhs}"
    builtin.__doc__ = f"DGL's ``{lhs}_{op}_{rhs}(lhs_field, rhs_field, out)``."
    return builtin


for _l in "uve":
    for _r in "uve":
        if _l != _r:
            for _op in _OPS:
                globals()[f"{_l}_{_op}_{_r}"] = _make(_l, _op, _r)
u_dot_v = globals()["u_dot_v"]  # named, so readers and linters find the common one
