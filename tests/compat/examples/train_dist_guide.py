# ruff: noqa
# The DGL guide's distributed GraphSAGE (chapter 7, "Distributed Training", the code block of
# its opening page; /work/shared/seed/ holds the Chinese text: docs/source/guide_cn/distributed.rst
# in dmlc/dgl), assembled into a runnable script.
# The guide's block is a fragment: it uses names it never defines (device, batch_size, SAGE,
# in_feats, num_hidden, n_classes, num_layers, F, dropout, nn, optim, args, load_subtensor) and
# reports nothing. The lines between "guide begins" and "guide ends" are the guide's, in order,
# byte for byte, except its three import lines (changed, each with its original in a comment)
# and two marked completion lines (in_feats, n_classes: they need g). The completion before the
# block defines the rest as DGL's example does (SAGE is runtime.nn's, DGL's example model; the
# features and labels are DGL's names "features"/"labels"); the completion after it prints the
# test accuracy. The guide's literals stay: the graph is named 'graph_name', the ip config is
# 'ip_config.txt' (dglctl launch puts it in the working folder) and the part config
# 'part_config.json' (DGL reads it only standalone: in a job the servers hold the partition).
# Run through dglctl launch with this folder on the trainers' PYTHONPATH (for its stand-ins).
# --- completion: what the guide's fragment uses and does not define ---
import argparse

import numpy as np
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from runtime.nn import SAGE

parser = argparse.ArgumentParser(description="the DGL guide's distributed GraphSAGE")
parser.add_argument("--num_epochs", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=1000)
parser.add_argument("--lr", type=float, default=0.003)
args = parser.parse_args()
device = "cpu"
batch_size = args.batch_size
num_hidden, num_layers, dropout = 16, 2, 0.5


def load_subtensor(g, input_nodes, seeds):
    """Features of the input nodes and labels of the seeds (DGL's example's)."""
    return g.ndata["features"][input_nodes], g.ndata["labels"][seeds]


# --- guide begins ---
import runtime as dgl  # was: import dgl
from runtime.loader.dataloading import NeighborSampler  # was: from dgl.dataloading import NeighborSampler
from runtime import DistGraph, DistDataLoader, node_split  # was: from dgl.distributed import DistGraph, DistDataLoader, node_split
import torch as th

# initialize distributed contexts
dgl.distributed.initialize('ip_config.txt')
th.distributed.init_process_group(backend='gloo')
# load distributed graph
g = DistGraph('graph_name', 'part_config.json')
pb = g.get_partition_book()
# get training workload, i.e., training node IDs
train_nid = node_split(g.ndata['train_mask'], pb, force_even=True)
in_feats = g.ndata["features"].shape[1]  # completion
n_classes = int(g.ndata["labels"][np.arange(g.num_nodes())].max()) + 1  # completion


# Create sampler
sampler = NeighborSampler(g, [10,25],
                          dgl.distributed.sample_neighbors,
                          device)

dataloader = DistDataLoader(
    dataset=train_nid.numpy(),
    batch_size=batch_size,
    collate_fn=sampler.sample_blocks,
    shuffle=True,
    drop_last=False)

# Define model and optimizer
model = SAGE(in_feats, num_hidden, n_classes, num_layers, F.relu, dropout)
model = th.nn.parallel.DistributedDataParallel(model)
loss_fcn = nn.CrossEntropyLoss()
optimizer = optim.Adam(model.parameters(), lr=args.lr)

# training loop
for epoch in range(args.num_epochs):
    with model.join():
        for step, blocks in enumerate(dataloader):
            batch_inputs, batch_labels = load_subtensor(g, blocks[0].srcdata[dgl.NID],
                                                        blocks[-1].dstdata[dgl.NID])
            batch_pred = model(blocks, batch_inputs)
            loss = loss_fcn(batch_pred, batch_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
# --- guide ends ---
# --- completion: the test accuracy, over every trainer's share of the test nodes ---
test_nid = node_split(g.ndata["test_mask"], pb, force_even=True)
model.eval()
correct = th.zeros(2, dtype=th.float64)
with th.no_grad():
    for blocks in DistDataLoader(test_nid.numpy(), batch_size, collate_fn=sampler.sample_blocks):
        x, y = load_subtensor(g, blocks[0].srcdata[dgl.NID], blocks[-1].dstdata[dgl.NID])
        pred = model.module(blocks, x).argmax(1)
        correct += th.tensor([(pred == y).sum().item(), len(y)], dtype=th.float64)
th.distributed.all_reduce(correct)
if th.distributed.get_rank() == 0:
    print(f"test accuracy {(correct[0] / correct[1]).item():.4f}")
