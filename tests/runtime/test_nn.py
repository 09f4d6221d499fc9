"""runtime.nn: SAGEConv, SAGE, GATConv, to_pyg and HeteroConv against dense references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from runtime.nn import SAGE, GATConv, HeteroConv, SAGEConv, relation_block, to_pyg
from runtime.sampling.block import Block, to_block

pytestmark = pytest.mark.unit

ET = ("_N", "_E", "_N")


def tiny_block() -> Block:
    """4 destination nodes (0..3) and 3 other sources; node 3 has no in-edges, one duplicate."""
    src = np.array([4, 5, 1, 6, 4, 4, 0])
    dst = np.array([0, 0, 1, 2, 2, 2, 1])
    return to_block({"_N": np.arange(4)}, {ET: (src, dst, np.arange(len(src)))})


def dense_adj(block: Block, etype=None) -> torch.Tensor:
    """``A[v, u]`` = number of edges ``u -> v`` (num_dst x num_src)."""
    src, dst = block.edges(etype)
    cet = block.canonical_etypes[0] if etype is None else etype
    a = torch.zeros(block.num_dst_nodes(cet[2]), block.num_src_nodes(cet[0]))
    return a.index_put_((dst, src), torch.ones(len(src)), accumulate=True)


def test_tiny_block_layout():
    b = tiny_block()
    assert (b.num_src_nodes(), b.num_dst_nodes()) == (7, 4)
    assert b.srcdata["_ID"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert b.in_degrees().tolist() == [2, 2, 3, 0]


def test_sage_degrees_from_the_csr_are_the_counted_ones():
    """The mean's degrees come from the block's CSR (its destinations unsorted, as a block of
    several machines' replies, a destination without edges): the same integers as a count
    of the edges, so the layer computes what it did before."""
    from runtime.nn.sage import _in_degrees

    rng = np.random.default_rng(3)
    dst = rng.integers(0, 40, 500)
    dst[dst == 7] = 8
    b = to_block({"_N": np.arange(50)}, {ET: (rng.integers(0, 300, 500), dst, np.arange(500))})
    counted = torch.bincount(b.edges()[1], minlength=50)
    assert counted[7] == 0 and not bool((b.edges()[1][1:] >= b.edges()[1][:-1]).all())
    assert torch.equal(_in_degrees(b, b.edges()[1], 50), counted)
    torch.manual_seed(0)
    conv = SAGEConv(6, 4, "mean")
    x = torch.randn(b.num_src_nodes(), 6)
    a = dense_adj(b)
    mean = (a @ x) / a.sum(1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(conv(b, x), x[:50] @ conv.fc_self.weight.T
                               + mean @ conv.fc_neigh.weight.T + conv.bias)


@pytest.mark.parametrize("in_feats,out_feats", [(5, 3), (3, 5)])  # both sides of lin_before_mp
def test_sage_mean_matches_dense(in_feats, out_feats):
    torch.manual_seed(0)
    b = tiny_block()
    conv = SAGEConv(in_feats, out_feats, "mean")
    with torch.no_grad():
        conv.bias.normal_()
    x = torch.randn(b.num_src_nodes(), in_feats)
    out = conv(b, x)
    a = dense_adj(b)
    mean = (a @ x) / a.sum(1, keepdim=True).clamp(min=1)
    ref = x[:4] @ conv.fc_self.weight.T + mean @ conv.fc_neigh.weight.T + conv.bias
    assert out.shape == (4, out_feats)
    torch.testing.assert_close(out, ref)
    # Node 3 has no in-edges: fc_self only (plus bias).
    torch.testing.assert_close(out[3], conv.fc_self(x[3]) + conv.bias)
    # Tuple input (src, dst) gives the same result.
    torch.testing.assert_close(conv(b, (x, x[:4])), out)


def test_sage_sum_pool_gcn_match_dense():
    torch.manual_seed(1)
    b = tiny_block()
    x = torch.randn(b.num_src_nodes(), 4)
    a = dense_adj(b)
    deg = a.sum(1, keepdim=True)

    conv = SAGEConv(4, 3, "sum", bias=False)
    ref = conv.fc_self(x[:4]) + conv.fc_neigh(a @ x)
    torch.testing.assert_close(conv(b, x), ref)

    conv = SAGEConv(4, 3, "pool", bias=False)
    p = F.relu(conv.fc_pool(x))  # (num_src, 4)
    masked = torch.where(a.unsqueeze(2) > 0, p.unsqueeze(0), torch.tensor(float("-inf")))
    pooled = masked.amax(1)
    pooled = torch.where(deg > 0, pooled, torch.zeros(()))
    ref = conv.fc_self(x[:4]) + conv.fc_neigh(pooled)
    torch.testing.assert_close(conv(b, x), ref)

    conv = SAGEConv(4, 3, "gcn", bias=False)
    ref = conv.fc_neigh((a @ x + x[:4]) / (deg + 1))
    torch.testing.assert_close(conv(b, x), ref)
    with pytest.raises(ValueError):
        SAGEConv(4, 3, "lstm")


def test_sage_gradients_flow():
    torch.manual_seed(2)
    b = tiny_block()
    for agg in ("mean", "pool"):
        conv = SAGEConv(4, 3, agg, activation=F.relu, norm=torch.nn.LayerNorm(3))
        x = torch.randn(b.num_src_nodes(), 4, requires_grad=True)
        conv(b, x).pow(2).sum().backward()
        for name, p in conv.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert x.grad is not None
        # Pure sources (4..6) get gradient through fc_neigh; node 3 (no in-edges, not a
        # neighbour of anyone) through fc_self only.
        assert x.grad[4:].abs().sum() > 0
        assert x.grad[3].abs().sum() > 0


def test_gat_attention_and_dense_reference():
    torch.manual_seed(3)
    b = tiny_block()
    heads, fo = 2, 3
    conv = GATConv(4, fo, heads, residual=True)
    with torch.no_grad():
        conv.bias.normal_()
    x = torch.randn(b.num_src_nodes(), 4)
    out, attn = conv(b, x, get_attention=True)
    src, dst = b.edges()
    assert out.shape == (4, heads, fo) and attn.shape == (b.num_edges(), heads, 1)
    sums = torch.zeros(4, heads, 1).index_add(0, dst, attn)
    has_in = b.in_degrees() > 0
    torch.testing.assert_close(sums[has_in], torch.ones(int(has_in.sum()), heads, 1))

    # Dense reference: per head, masked softmax over v's row (duplicate edges count twice).
    wh = conv.fc(x).view(-1, heads, fo)
    el = (wh * conv.attn_l).sum(-1)  # (num_src, H)
    er = (wh[:4] * conv.attn_r).sum(-1)  # (num_dst, H)
    a = dense_adj(b)
    ref = torch.zeros(4, heads, fo)
    for h in range(heads):
        s = F.leaky_relu(er[:, h : h + 1] + el[:, h].unsqueeze(0), 0.2)  # (num_dst, num_src)
        w = torch.where(a > 0, torch.exp(s) * a, torch.zeros(()))
        w = w / w.sum(1, keepdim=True).clamp(min=1e-30)
        ref[:, h] = w @ wh[:, h]
    ref = ref + conv.res_fc(x[:4]).view(4, heads, fo) + conv.bias.view(1, heads, fo)
    torch.testing.assert_close(out, ref)
    # No in-edges: residual + bias only.
    torch.testing.assert_close(out[3], (conv.res_fc(x[3]) + conv.bias).view(heads, fo))

    out.sum().backward()
    assert conv.attn_l.grad is not None and conv.attn_r.grad.abs().sum() > 0
    with pytest.raises(ValueError):
        GATConv(4, fo, heads, allow_zero_in_degree=False)(b, x)


def test_gat_softmax_is_stable_and_tuple_input():
    torch.manual_seed(4)
    b = tiny_block()
    conv = GATConv((4, 6), 2, 3)
    with torch.no_grad():
        conv.attn_l.mul_(1e4)
        conv.attn_r.mul_(1e4)
    xs, xd = torch.randn(b.num_src_nodes(), 4), torch.randn(4, 6)
    out, attn = conv(b, (xs, xd), get_attention=True)
    assert out.shape == (4, 3, 2)
    assert torch.isfinite(out).all() and torch.isfinite(attn).all()


def test_to_pyg():
    b = tiny_block()
    edge_index, size = to_pyg(b)
    assert edge_index.dtype == torch.long and edge_index.shape == (2, b.num_edges())
    assert size == (7, 4)
    src, dst = b.edges()
    assert torch.equal(edge_index[0], src) and torch.equal(edge_index[1], dst)
    hb = hetero_block()
    ei, size = to_pyg(hb, "clicks")
    assert ei.shape == (2, hb.num_edges("clicks"))
    assert size == (hb.num_src_nodes("user"), hb.num_dst_nodes("item"))
    with pytest.raises(KeyError):
        to_pyg(hb)


def toy_blocks(rng: np.random.Generator, n: int, n_out: int, fanout: int) -> list[Block]:
    """Two layers of uniformly sampled in-neighbours over a random graph of ``n`` nodes."""
    blocks = []
    dst = np.arange(n_out)
    for _ in range(2):
        d = np.repeat(dst, fanout)
        s = rng.integers(0, n, len(d))
        b = to_block({"_N": dst}, {ET: (s, d, np.arange(len(d)))})
        blocks.insert(0, b)
        dst = b.srcdata["_ID"].numpy()
    return blocks


def test_sage_model_trains():
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    n, n_out, n_classes = 200, 48, 3
    blocks = toy_blocks(rng, n, n_out, fanout=4)
    feats = torch.randn(n, 8)
    labels = (feats[:n_out] @ torch.randn(8, n_classes)).argmax(1)  # learnable from self-features
    x = feats[blocks[0].srcdata["_ID"]]
    model = SAGE(8, 16, n_classes, n_layers=2, dropout=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)

    def loss_eval() -> float:
        model.eval()
        with torch.no_grad():
            return F.cross_entropy(model(blocks, x), labels).item()

    first = loss_eval()
    for _ in range(30):
        model.train()
        loss = F.cross_entropy(model(blocks, x), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    last = loss_eval()
    assert last < 0.5 * first, (first, last)
    assert model(blocks, x).shape == (n_out, n_classes)
    with pytest.raises(ValueError):
        model(blocks[:1], x)


def hetero_block() -> Block:
    """Users 0..2 and items 0..1 as destinations; follows (user->user), clicks (user->item),
    bought (item->user)."""
    sampled = {
        ("user", "follows", "user"): (np.array([3, 4, 0, 3]), np.array([0, 0, 1, 2]),
                                      np.arange(4)),
        ("user", "clicks", "item"): (np.array([1, 5, 5]), np.array([0, 0, 1]), np.arange(3)),
        ("item", "bought", "user"): (np.array([7, 0, 8]), np.array([0, 1, 1]), np.arange(3)),
    }
    return to_block({"user": np.arange(3), "item": np.arange(2)}, sampled)


def test_relation_block():
    hb = hetero_block()
    rb = relation_block(hb, "follows")
    assert rb.is_homogeneous()
    assert (rb.num_src_nodes(), rb.num_dst_nodes()) == (hb.num_src_nodes("user"), 3)
    assert torch.equal(rb.edges()[0], hb.edges("follows")[0])
    rb = relation_block(hb, ("user", "clicks", "item"))
    assert rb.canonical_etypes == [("user", "clicks", "item")]
    assert rb.num_src_nodes("user") == hb.num_src_nodes("user")
    assert rb.num_dst_nodes("item") == 2 and rb.num_dst_nodes("user") == 0
    assert rb.dstnodes["item"].data["_ID"].tolist() == [0, 1]
    assert torch.equal(rb.edge_ids(), hb.edge_ids("clicks"))


def test_hetero_conv_sums_per_destination_type():
    torch.manual_seed(6)
    hb = hetero_block()
    mods = {"follows": SAGEConv(4, 3), "clicks": SAGEConv((4, 5), 3), "bought": SAGEConv((5, 4), 3)}
    conv = HeteroConv(mods, aggregate="sum")
    xu = torch.randn(hb.num_src_nodes("user"), 4, requires_grad=True)
    xi = torch.randn(hb.num_src_nodes("item"), 5)
    out = conv(hb, {"user": xu, "item": xi})
    assert set(out) == {"user", "item"}
    assert out["user"].shape == (3, 3) and out["item"].shape == (2, 3)

    def run(name, xs, xd):
        return mods[name](relation_block(hb, name), (xs, xd))

    ref_user = run("follows", xu, xu[:3]) + run("bought", xi, xu[:3])
    torch.testing.assert_close(out["user"], ref_user)
    torch.testing.assert_close(out["item"], run("clicks", xu, xi[:2]))
    # A dense check of one relation across types: mean over clicks.
    a = dense_adj(hb, ("user", "clicks", "item"))
    m = mods["clicks"]
    mean = (a @ xu) / a.sum(1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(out["item"], m.fc_self(xi[:2]) + m.fc_neigh(mean) + m.bias)
    out["user"].sum().backward()
    assert xu.grad is not None

    # Only user inputs: relations from or into items are skipped (as in DGL).
    only = conv(hb, {"user": xu})
    assert set(only) == {"user"}
    torch.testing.assert_close(only["user"], run("follows", xu, xu[:3]))


def test_hetero_conv_gat_stack_and_canonical_keys():
    torch.manual_seed(7)
    hb = hetero_block()
    mods = {
        ("user", "follows", "user"): GATConv(4, 2, 2),
        "bought": GATConv((5, 4), 2, 2),
        "clicks": GATConv((4, 5), 2, 2),
    }
    conv = HeteroConv(mods, aggregate="stack")
    xu = torch.randn(hb.num_src_nodes("user"), 4)
    xi = torch.randn(hb.num_src_nodes("item"), 5)
    out = conv(hb, {"user": xu, "item": xi})
    assert out["user"].shape == (3, 2, 2, 2) and out["item"].shape == (2, 1, 2, 2)
    follows = mods[("user", "follows", "user")](relation_block(hb, "follows"), (xu, xu[:3]))
    torch.testing.assert_close(out["user"][:, 0], follows)


def test_dropout_matches_torch_semantics():
    from runtime.nn.dropout import Dropout

    torch.manual_seed(0)
    d = Dropout(0.3)
    x = torch.ones(400, 500, requires_grad=True)
    y = d(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.01
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.7))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d(x * mask)/dx = mask
    d.eval()
    assert d(x) is x
    assert torch.equal(Dropout(0.0).train()(x), x)


@pytest.mark.parametrize("sorted_dst", [True, False])
def test_block_csr_is_a_stable_sort_by_destination(sorted_dst):
    """The CSR the layers multiply with (a compiled counting sort): each destination's edges
    in their given order, as numpy's stable argsort gives them, sorted or not (a block of
    several machines' replies is not), a destination without edges included; an edge whose
    destination is outside the block is a ValueError, not a write out of bounds."""
    rng = np.random.default_rng(5)
    dst = rng.integers(0, 40, 600)
    dst[dst == 9] = 10
    if sorted_dst:
        dst = np.sort(dst)
    src = rng.integers(0, 300, 600)
    b = to_block({"_N": np.arange(50)}, {ET: (src, dst, np.arange(600))})
    bsrc, bdst = (t.numpy() for t in b.edges())
    crow, col, order = b.csr()
    want = np.argsort(bdst, kind="stable")
    np.testing.assert_array_equal(order.numpy(), want)
    np.testing.assert_array_equal(col.numpy(), bsrc[want])
    np.testing.assert_array_equal(crow.numpy(), np.concatenate(
        [[0], np.cumsum(np.bincount(bdst, minlength=50))]))
    assert crow[10] == crow[11] - np.sum(bdst == 10) and np.sum(bdst == 9) == 0
    bad = Block({"_N": torch.arange(5)}, {"_N": 2},
                {ET: (torch.tensor([0, 1]), torch.tensor([0, 2]), torch.tensor([0, 1]))})
    with pytest.raises(ValueError, match="destination is outside"):
        bad.csr()
