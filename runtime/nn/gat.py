"""Graph attention (DGL's ``GATConv``) on message-flow blocks in plain torch."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from runtime.nn.dropout import Dropout
from runtime.nn.sage import Feat, block_edges
from runtime.sampling.block import Block


def edge_softmax(scores: torch.Tensor, dst: torch.Tensor, num_dst: int) -> torch.Tensor:
    """Softmax of edge ``scores`` ``(E, ...)`` over the in-edges of each destination node.

    The per-destination maximum (``scatter_reduce`` ``"amax"``) is subtracted first, so large
    scores do not overflow; nodes without in-edges simply receive nothing.
    """
    index = dst.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
    shape = (num_dst, *scores.shape[1:])
    # Softmax is shift-invariant, so the maximum needs no gradient.
    smax = scores.new_zeros(shape).scatter_reduce(
        0, index, scores.detach(), reduce="amax", include_self=False
    )
    exp = torch.exp(scores - smax[dst])
    denom = scores.new_zeros(shape).index_add(0, dst, exp)
    return exp / denom[dst]


class GATConv(nn.Module):
    """Graph attention layer (DGL's ``GATConv``) on a one-edge-type block.

    For every edge ``u -> v`` and head ``k``:
    ``e = leaky_relu(a_l . W h_u + a_r . W h_v)``, ``alpha = softmax over v's in-edges``,
    ``out_v = sum_u alpha * W h_u`` (+ residual) (+ bias), then ``activation``.
    Destination nodes without in-edges get a zero aggregate (DGL raises unless
    ``allow_zero_in_degree``; here it is allowed by default, and ``False`` restores the check).

    Args:
        in_feats: input size, or ``(source size, destination size)`` (separate projections).
        out_feats: output size per head.
        num_heads: number of attention heads.
        feat_drop: dropout on the input features.
        attn_drop: dropout on the attention coefficients.
        negative_slope: LeakyReLU slope of the attention scores.
        residual: add a (projected, if sizes differ) residual connection.
        activation: optional callable applied last.
        bias: add a learnable bias ``(num_heads * out_feats)``.
        allow_zero_in_degree: if ``False``, raise on destination nodes without in-edges.
    """

    def __init__(
        self,
        in_feats: int | tuple[int, int],
        out_feats: int,
        num_heads: int,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        negative_slope: float = 0.2,
        residual: bool = False,
        activation: Callable[[torch.Tensor], torch.Tensor] | None = None,
        bias: bool = True,
        allow_zero_in_degree: bool = True,
    ) -> None:
        super().__init__()
        self._num_heads = num_heads
        self._out_feats = out_feats
        self._allow_zero_in_degree = allow_zero_in_degree
        if isinstance(in_feats, tuple):
            self._in_src_feats, self._in_dst_feats = in_feats
            self.fc_src = nn.Linear(self._in_src_feats, out_feats * num_heads, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, out_feats * num_heads, bias=False)
        else:
            self._in_src_feats = self._in_dst_feats = in_feats
            self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = Dropout(feat_drop)
        self.attn_drop = Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.res_fc: nn.Module | None = None
        if residual:
            if self._in_dst_feats != out_feats * num_heads:
                self.res_fc = nn.Linear(self._in_dst_feats, num_heads * out_feats, bias=False)
            else:
                self.res_fc = nn.Identity()
        self.bias = nn.Parameter(torch.zeros(num_heads * out_feats)) if bias else None
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-normal weights (gain of ReLU), zero bias, as DGL."""
        gain = nn.init.calculate_gain("relu")
        if hasattr(self, "fc"):
            nn.init.xavier_normal_(self.fc.weight, gain=gain)
        else:
            nn.init.xavier_normal_(self.fc_src.weight, gain=gain)
            nn.init.xavier_normal_(self.fc_dst.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(
        self, block: Block, feat: Feat, get_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Destination features ``(num_dst, num_heads, out_feats)``.

        Args:
            block: a block with one edge type.
            feat: source-node features (destination nodes are the first rows), or a tuple
                ``(source features, destination features)``.
            get_attention: also return the attention coefficients ``(E, num_heads, 1)``,
                in the order of ``block.edges()``.
        """
        src, dst, _, num_dst = block_edges(block)
        heads, out_feats = self._num_heads, self._out_feats
        if hasattr(self, "fc"):
            fc_src = fc_dst = self.fc
        else:
            fc_src, fc_dst = self.fc_src, self.fc_dst
        if isinstance(feat, tuple):
            h_src = self.feat_drop(feat[0])
            h_dst = self.feat_drop(feat[1])
            feat_src = fc_src(h_src).view(-1, heads, out_feats)
            feat_dst = fc_dst(h_dst).view(-1, heads, out_feats)
        else:
            h_src = self.feat_drop(feat)
            h_dst = h_src[:num_dst]
            feat_src = fc_src(h_src).view(-1, heads, out_feats)
            feat_dst = feat_src[:num_dst]
        src = src.to(feat_src.device)
        dst = dst.to(feat_src.device)
        if not self._allow_zero_in_degree:
            if bool((torch.bincount(dst, minlength=num_dst) == 0).any()):
                raise ValueError(
                    "destination nodes without in-edges: their output would be only the "
                    "residual/bias; pass allow_zero_in_degree=True to accept that"
                )
        el = (feat_src * self.attn_l).sum(dim=-1, keepdim=True)  # (num_src, H, 1)
        er = (feat_dst * self.attn_r).sum(dim=-1, keepdim=True)  # (num_dst, H, 1)
        e = self.leaky_relu(el[src] + er[dst])  # (E, H, 1)
        attn = self.attn_drop(edge_softmax(e, dst, num_dst))
        rst = feat_src.new_zeros((num_dst, heads, out_feats)).index_add(
            0, dst, feat_src[src] * attn
        )
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, out_feats)
        if self.bias is not None:
            rst = rst + self.bias.view(1, heads, out_feats)
        if self.activation is not None:
            rst = self.activation(rst)
        if get_attention:
            return rst, attn
        return rst

    def extra_repr(self) -> str:
        return f"num_heads={self._num_heads}, out_feats={self._out_feats}"
