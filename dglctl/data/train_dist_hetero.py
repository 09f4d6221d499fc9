"""Distributed node classification on a heterogeneous graph with per-edge-type fanouts.

Classifies ``paper`` nodes of a graph with ``paper`` and ``author`` nodes (``dglctl generate
--hetero`` makes one) with a 2-layer relational GraphSAGE: one SAGEConv per edge type, summed
per destination type (``runtime.nn.HeteroConv``). Seeds, blocks and features are per type.

``dglctl launch examples/train_dist_hetero.py -- --graph-name NAME`` or standalone with
``--part-config`` of a 1-part partition. With ``--checkpoint-dir DIR`` it saves a checkpoint
every ``--checkpoint-every`` steps and, when started again with the same arguments, goes on
from the newest one; rank 0 ends with the final ``model checksum``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

import runtime
from runtime import NID, DistDataLoader, DistGraph, NeighborSampler, checkpoint, node_split
from runtime.nn import HeteroConv, SAGEConv

TARGET = "paper"


class RelSAGE(nn.Module):
    """Input projection per node type, then HeteroConv layers of SAGEConv per edge type."""

    def __init__(self, in_dims: dict[str, int], etypes: list, hidden: int, n_classes: int,
                 layers: int, dropout: float) -> None:
        super().__init__()
        self.inputs = nn.ModuleDict({t: nn.Linear(d, hidden) for t, d in in_dims.items()})
        dims = [hidden] * layers + [n_classes]
        self.layers = nn.ModuleList(
            HeteroConv({et: SAGEConv(dims[i], dims[i + 1]) for et in etypes})
            for i in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x: dict[str, th.Tensor]) -> th.Tensor:
        h = {t: self.inputs[t](v) for t, v in x.items()}
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = {t: self.dropout(F.relu(v)) for t, v in h.items()}
        return h[TARGET]


def load_inputs(g, blocks):
    ids = blocks[0].srcdata[NID]
    x = {t: g.nodes[t].data["feat"][v] for t, v in ids.items() if len(v)}
    y = g.nodes[TARGET].data["label"][blocks[-1].dstdata[NID][TARGET]]
    return x, y


def accuracy(g, model, nids, sampler, batch_size, device) -> float:
    model.eval()
    correct = th.zeros(2, dtype=th.float64)
    loader = DistDataLoader(nids.numpy(), batch_size,
                            collate_fn=lambda s: sampler.sample_blocks({TARGET: s}),
                            device=device)
    with th.no_grad():
        for blocks in loader:
            x, y = load_inputs(g, blocks)
            pred = model(blocks, x).argmax(1)
            correct += th.tensor([(pred == y).sum().item(), len(y)], dtype=th.float64)
    if th.distributed.is_initialized():
        correct = correct.to(device)  # (NCCL reduces device tensors)
        th.distributed.all_reduce(correct)
        correct = correct.cpu()
    model.train()
    return (correct[0] / correct[1].clamp(min=1)).item()


def model_checksum(model) -> str:
    """sha256 (hex) of ``model``'s state_dict tensors, in key order: equal bits, equal sum."""
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(args):
    runtime.initialize(args.ip_config)
    # The launcher's GPU for this trainer with --num-gpus (cuda:LOCAL_RANK), else the CPU.
    device = runtime.device(args.device)
    if device.type == "cuda":
        th.cuda.set_device(device)
    th.distributed.init_process_group(
        backend=runtime.ddp_backend(device) if args.backend == "auto" else args.backend)
    rank = th.distributed.get_rank()
    th.manual_seed(args.seed)
    g = DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    masks = {k: g.nodes[TARGET].data[k] for k in ("train_mask", "val_mask", "test_mask")}
    train_nid, val_nid, test_nid = (node_split(masks[k], pb, ntype=TARGET)
                                    for k in ("train_mask", "val_mask", "test_mask"))
    fanouts = [json.loads(f) for f in args.fanouts]
    sampler = NeighborSampler(fanouts, seed=args.seed)
    labels = g.nodes[TARGET].data["label"][np.arange(g.num_nodes(TARGET))]
    in_dims = {t: g.nodes[t].data["feat"].shape[1] for t in g.ntypes}
    model = RelSAGE(in_dims, g.canonical_etypes, args.num_hidden, int(labels.max()) + 1,
                    len(fanouts), args.dropout)
    model = th.nn.parallel.DistributedDataParallel(
        model.to(device), device_ids=[device] if device.type == "cuda" else None,
        find_unused_parameters=True)
    opt = th.optim.Adam(model.parameters(), lr=args.lr)
    loader = DistDataLoader(train_nid.numpy(), args.batch_size, shuffle=True, seed=args.seed,
                            collate_fn=lambda s: sampler.sample_blocks({TARGET: s}),
                            device=device)
    # Resume from the newest checkpoint, if any. Only here, once everything is built: it
    # restores the random generators as they were after the saved step, so nothing may draw
    # from them between this load and the first resumed step (building the model does).
    global_step = 0  # optimizer steps, across epochs
    losses = []  # the current epoch's, so far
    if args.checkpoint_dir:
        ckpt = checkpoint.load_latest(args.checkpoint_dir, model=model, optimizer=opt)
        if ckpt is not None:
            loader.load_state_dict(ckpt.extra["loader"])
            global_step, losses = ckpt.extra["step"], ckpt.extra["losses"]
            if rank == 0:
                at = ckpt.extra["loader"]
                print(f"resumed from checkpoint step {global_step} (epoch {at['epoch']}, "
                      f"batch {at['step']})", flush=True)
    resume_at = loader.state_dict()

    for epoch in range(resume_at["epoch"], args.num_epochs):
        if epoch != resume_at["epoch"] or resume_at["step"] == 0:
            losses = []
        t0 = time.perf_counter()
        with model.join():
            for blocks in loader:
                x, y = load_inputs(g, blocks)
                loss = F.cross_entropy(model(blocks, x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                global_step += 1
                if args.checkpoint_dir and global_step % args.checkpoint_every == 0:
                    # The loader's state names the next batch: a resumed run starts there.
                    checkpoint.save(args.checkpoint_dir, global_step, model=model, optimizer=opt,
                                    extra={"loader": loader.state_dict(), "step": global_step,
                                           "losses": losses})
        val = accuracy(g, model.module, val_nid, sampler, args.batch_size, device)
        if rank == 0:
            print(f"epoch {epoch}: loss {np.mean(losses):.4f}, val acc {val:.4f}, "
                  f"time {time.perf_counter() - t0:.2f}s", flush=True)
    test = accuracy(g, model.module, test_nid, sampler, args.batch_size, device)
    if rank == 0:
        print(f"test accuracy {test:.4f}", flush=True)
        print(f"model checksum {model_checksum(model.module)}", flush=True)
    th.distributed.destroy_process_group()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--graph-name", required=True)
    p.add_argument("--ip-config", default=None)
    p.add_argument("--part-config", default=None)
    p.add_argument("--num-epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--fanouts", nargs="+",
                   default=['{"cites": 5, "writes": 3, "written-by": 3}',
                            '{"cites": 10, "writes": 5, "written-by": 5}'],
                   help="per layer, a JSON map edge type -> fanout (input layer first)")
    p.add_argument("--num-hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto: the GPU "
                   "the launcher gave this trainer (--num-gpus), else the CPU")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                   help="torch.distributed backend (auto: nccl on GPUs, gloo on CPUs)")
    p.add_argument("--checkpoint-dir", default=None, help="save checkpoints there and resume "
                   "from the newest one at start (default: no checkpoints)")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="optimizer steps (counted across epochs) between checkpoints")
    args = p.parse_args(argv)
    if args.checkpoint_every < 1:
        p.error(f"--checkpoint-every {args.checkpoint_every}: must be >= 1")
    return args


if __name__ == "__main__":
    main(parse_args())
