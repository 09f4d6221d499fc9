"""Blocks for PyTorch Geometric layers (``to_pyg``) and per-edge-type convolution (``HeteroConv``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from runtime.sampling.block import NID, Block, CanonicalEtype


def to_pyg(block: Block, etype: Any = None) -> tuple[torch.Tensor, tuple[int, int]]:
    """``(edge_index, size)`` of one edge type of ``block``, in PyTorch Geometric's layout.

    ``edge_index`` is a ``LongTensor [2, E]`` (row 0: source local index, row 1: destination
    local index) and ``size`` is ``(num_src, num_dst)`` of the edge type's node types, so
    ``conv((x_src, x_src[:num_dst]), edge_index, size=size)`` runs a PyG layer on the block.

    Args:
        block: the block.
        etype: edge type (name or canonical tuple); may be omitted with one edge type.
    """
    cet = _canonical(block, etype)
    src, dst = block.edges(cet)
    edge_index = torch.stack([src.long(), dst.long()])
    return edge_index, (block.num_src_nodes(cet[0]), block.num_dst_nodes(cet[2]))


def _canonical(block: Block, etype: Any) -> CanonicalEtype:
    etypes = block.canonical_etypes
    if etype is None:
        if len(etypes) != 1:
            raise KeyError(f"several edge types; name one of {etypes}")
        return etypes[0]
    if isinstance(etype, tuple):
        if etype not in etypes:
            raise KeyError(f"edge type {etype!r} not in {etypes}")
        return etype
    matches = [c for c in etypes if c[1] == etype]
    if len(matches) != 1:
        raise KeyError(f"edge type {etype!r} unknown or ambiguous in {etypes}")
    return matches[0]


def relation_block(block: Block, etype: Any) -> Block:
    """A block holding only the edges of one edge type (DGL's ``block[etype]``).

    If the edge type's source and destination types are the same, the result is homogeneous
    (that type's source nodes, same destination count). Otherwise it has two node types: every
    source node of the source type (no destination nodes) and just the destination nodes of the
    destination type. Node ids, local edge indices and edge ids are the parent's.
    """
    cet = _canonical(block, etype)
    stype, _, dtype = cet
    src, dst = block.edges(cet)
    edges = {cet: (src, dst, block.edge_ids(cet))}
    src_ids = block.srcnodes[stype].data[NID]
    num_dst = block.num_dst_nodes(dtype)
    if stype == dtype:
        return Block({stype: src_ids}, {stype: num_dst}, edges)
    dst_ids = block.dstnodes[dtype].data[NID]
    return Block({stype: src_ids, dtype: dst_ids}, {stype: 0, dtype: num_dst}, edges)


def _agg(name: str) -> Callable[[list[torch.Tensor], str], torch.Tensor]:
    if name == "sum":
        return lambda xs, _: torch.stack(xs).sum(0)
    if name == "mean":
        return lambda xs, _: torch.stack(xs).mean(0)
    if name == "max":
        return lambda xs, _: torch.stack(xs).amax(0)
    if name == "min":
        return lambda xs, _: torch.stack(xs).amin(0)
    if name == "stack":
        return lambda xs, _: torch.stack(xs, dim=1)
    raise ValueError(f"aggregate {name!r} not supported; use sum, mean, max, min or stack")


class HeteroConv(nn.Module):
    """Per-edge-type convolution on a heterogeneous block (DGL's ``HeteroGraphConv``).

    For every edge type ``(stype, etype, dtype)`` of the block, the module for that edge type
    runs on :func:`relation_block` with input ``(src_inputs[stype], dst_inputs[dtype])``; the
    results of each destination type are combined with ``aggregate``. Edge types whose source
    or destination type has no input are skipped; destination types no edge type reached are
    absent from the output.

    Args:
        mods: edge type -> module taking ``(block, (h_src, h_dst), ...)``. Keys are edge type
            names, or canonical ``(stype, etype, dtype)`` tuples (which win over names).
        aggregate: ``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"stack"`` (new dimension 1)
            or a callable ``(list of tensors, dst type) -> tensor``.
    """

    def __init__(
        self,
        mods: Mapping[str | CanonicalEtype, nn.Module],
        aggregate: str | Callable[[list[torch.Tensor], str], torch.Tensor] = "sum",
    ) -> None:
        super().__init__()
        self.mods = nn.ModuleDict({str(k): m for k, m in mods.items()})
        self.agg_fn = _agg(aggregate) if isinstance(aggregate, str) else aggregate

    def _get_module(self, cet: CanonicalEtype) -> nn.Module:
        if str(cet) in self.mods:
            return self.mods[str(cet)]
        if cet[1] in self.mods:
            return self.mods[cet[1]]
        raise KeyError(f"no module for edge type {cet}")

    def forward(
        self,
        block: Block,
        inputs: Mapping[str, torch.Tensor]
        | tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
        mod_args: Mapping[str, tuple] | None = None,
        mod_kwargs: Mapping[str, dict[str, Any]] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Destination type -> aggregated output of the modules of the edge types into it.

        Args:
            block: a (heterogeneous) block.
            inputs: node type -> source-node features (destination nodes first), or a tuple
                ``(source inputs, destination inputs)``.
            mod_args: edge type name -> extra positional arguments of its module.
            mod_kwargs: edge type name -> extra keyword arguments of its module.
        """
        mod_args = mod_args or {}
        mod_kwargs = mod_kwargs or {}
        if isinstance(inputs, tuple):
            src_inputs, dst_inputs = inputs
        else:
            src_inputs = inputs
            dst_inputs = {t: v[: block.num_dst_nodes(t)] for t, v in inputs.items()}
        outputs: dict[str, list[torch.Tensor]] = {}
        for cet in block.canonical_etypes:
            stype, etype, dtype = cet
            if stype not in src_inputs or dtype not in dst_inputs:
                continue
            out = self._get_module(cet)(
                relation_block(block, cet),
                (src_inputs[stype], dst_inputs[dtype]),
                *mod_args.get(etype, ()),
                **mod_kwargs.get(etype, {}),
            )
            outputs.setdefault(dtype, []).append(out)
        return {t: self.agg_fn(xs, t) for t, xs in outputs.items() if xs}
