# ruff: noqa: I001 (the DGL imports stay in their marked block, after torch)
"""A DGL user's distributed benchmark script: sampling, feature pull and training phases.

Written for DGL 1.1.3's distributed mode, the way a DGL user times a cluster (DGL ships no
such script): ``import dgl`` and ``dgl.distributed.*``, ``dgl.dataloading.*``, GraphSAGE built
from ``dglnn.SAGEConv`` as DGL's ``examples/pytorch/graphsage/dist/train_dist.py`` does.
bench/dist_vs_dgl.py runs it as it is under DGL, and under ``dglctl launch`` with only the two
import lines between the markers changed (``bench/dgl_imports.py`` makes that copy and checks
nothing else differs). Rank 0 prints one ``DIST_BENCH {json}`` line with every trainer's
figures combined.
"""

import argparse
import json
import time

import torch as th
import torch.nn as nn
import torch.nn.functional as F

# imports: begin
import dgl
import dgl.nn.pytorch as dglnn
# imports: end

STARTED = time.time()


class DistSAGE(nn.Module):
    """DGL's example model: SAGEConv layers (mean), ReLU and dropout between them."""

    def __init__(self, in_feats, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        self.layers = nn.ModuleList()
        self.layers.append(dglnn.SAGEConv(in_feats, n_hidden, "mean"))
        for _ in range(1, n_layers - 1):
            self.layers.append(dglnn.SAGEConv(n_hidden, n_hidden, "mean"))
        self.layers.append(dglnn.SAGEConv(n_hidden, n_classes, "mean"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def combined(values, op):
    """One all-reduce of a float vector across the trainers (sum or max)."""
    t = th.tensor(values, dtype=th.float64)
    th.distributed.all_reduce(t, op=op)
    return t.tolist()


def sampling_phase(g, train_nid, sampler, args):
    """Draw ``--sample-steps`` mini-batches without training: seeds and edges per second."""
    loader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False)
    seeds = edges = 0
    th.distributed.barrier()
    tic = time.time()
    for step, (_, output_nodes, blocks) in enumerate(loader):
        seeds += len(output_nodes)
        edges += sum(b.num_edges() for b in blocks)
        if step + 1 == args.sample_steps:
            break
    elapsed = time.time() - tic
    seeds, edges = combined([seeds, edges], th.distributed.ReduceOp.SUM)
    (slowest,) = combined([elapsed], th.distributed.ReduceOp.MAX)
    return {"seeds_s": seeds / slowest, "edges_s": edges / slowest, "seconds": slowest}


def pull_phase(g, args):
    """Read the features of ``--pull-ids`` random nodes, ``--pull-repeat`` times: GB/s."""
    pb = g.get_partition_book()
    gen = th.Generator().manual_seed(1000 + th.distributed.get_rank())
    ids = th.randint(0, g.num_nodes(), (args.pull_ids,), generator=gen)
    remote = 1.0 - (pb.nid2partid(ids) == pb.partid).float().mean().item()
    feat = g.ndata["feat"]
    feat[ids]  # warm-up
    th.distributed.barrier()
    tic = time.time()
    nbytes = 0
    for _ in range(args.pull_repeat):
        rows = feat[ids]
        nbytes += rows.numel() * rows.element_size()
    elapsed = time.time() - tic
    (nbytes,) = combined([nbytes], th.distributed.ReduceOp.SUM)
    (slowest,) = combined([elapsed], th.distributed.ReduceOp.MAX)
    return {"gb_s": nbytes / slowest / 1e9, "remote_fraction": remote, "seconds": slowest}


def train_phase(g, train_nid, sampler, in_feats, n_classes, args):
    """``--steps`` training steps: the epoch time, its split and the loss of each step."""
    loader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False)
    th.manual_seed(args.seed)
    model = DistSAGE(in_feats, args.num_hidden, n_classes, 2, args.dropout)
    model = th.nn.parallel.DistributedDataParallel(model)
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)
    split = {"sample": 0.0, "fetch": 0.0, "forward": 0.0, "backward": 0.0, "update": 0.0}
    losses = []
    steps = 0
    th.distributed.barrier()
    tic = time.time()
    while steps < args.steps:
        mark = time.time()
        for input_nodes, seeds, blocks in loader:
            now = time.time()
            split["sample"] += now - mark
            x = g.ndata["feat"][input_nodes]
            y = g.ndata["label"][seeds].long()
            mark = time.time()
            split["fetch"] += mark - now
            loss = F.cross_entropy(model(blocks, x), y)
            now = time.time()
            split["forward"] += now - mark
            optimizer.zero_grad()
            loss.backward()
            mark = time.time()
            split["backward"] += mark - now
            optimizer.step()
            now = time.time()
            split["update"] += now - mark
            losses.append(loss.item())
            steps += 1
            if steps == args.steps:
                break
            mark = time.time()
    elapsed = time.time() - tic
    (slowest,) = combined([elapsed], th.distributed.ReduceOp.MAX)
    names = sorted(split)
    mean_split = combined([split[k] for k in names], th.distributed.ReduceOp.SUM)
    world = th.distributed.get_world_size()
    mean_losses = combined(losses, th.distributed.ReduceOp.SUM)
    return model, {"epoch_s": slowest, "steps": steps,
                   "split": {k: v / world for k, v in zip(names, mean_split, strict=True)},
                   "losses": [v / world for v in mean_losses]}


def accuracy(g, model, test_nid, sampler, args):
    """Accuracy on (at most ``--eval-batches`` batches of) each trainer's test nodes."""
    loader = dgl.dataloading.DistNodeDataLoader(
        g, test_nid, sampler, batch_size=args.batch_size, shuffle=False, drop_last=False)
    model.eval()
    correct = total = 0
    with th.no_grad():
        for step, (input_nodes, seeds, blocks) in enumerate(loader):
            pred = model(blocks, g.ndata["feat"][input_nodes]).argmax(1)
            correct += int((pred == g.ndata["label"][seeds].long()).sum())
            total += len(seeds)
            if step + 1 == args.eval_batches:
                break
    correct, total = combined([correct, total], th.distributed.ReduceOp.SUM)
    return correct / max(total, 1)


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    in_feats = g.ndata["feat"].shape[1]
    n_classes = args.num_classes
    (ready,) = combined([time.time() - STARTED], th.distributed.ReduceOp.MAX)
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
    result = {"ready_s": ready, "nodes": g.num_nodes(), "edges": g.num_edges(),
              "trainers": th.distributed.get_world_size()}
    result["sampling"] = sampling_phase(g, train_nid, sampler, args)
    result["pull"] = pull_phase(g, args)
    model, result["train"] = train_phase(g, train_nid, sampler, in_feats, n_classes, args)
    result["test_acc"] = accuracy(g, model, test_nid, sampler, args)
    if th.distributed.get_rank() == 0:
        print("DIST_BENCH " + json.dumps(result), flush=True)
    th.distributed.barrier()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graph_name", type=str, default="bench")
    parser.add_argument("--ip_config", type=str, default="ip_config.txt")
    parser.add_argument("--part_config", type=str, default=None)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--num_hidden", type=int, default=64)
    parser.add_argument("--num_classes", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=50, help="training steps per trainer")
    parser.add_argument("--sample-steps", type=int, default=30)
    parser.add_argument("--pull-ids", type=int, default=10000)
    parser.add_argument("--pull-repeat", type=int, default=20)
    parser.add_argument("--eval-batches", type=int, default=20)
    main(parser.parse_args())
