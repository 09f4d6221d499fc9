"""Distributed link prediction: GraphSAGE over features plus a learnable DistEmbedding table.

Edges are batched by ``DistEdgeDataLoader`` with uniform negative sampling (k negatives per
positive edge, the batch's own edges excluded from the sampled neighbourhoods); node inputs are
the node features concatenated with a ``DistEmbedding`` row trained by ``SparseAdam``, whose
updates are applied by the machine that owns each row. Rank 0 prints the loss per epoch and
the validation AUC (positive held-out edges against uniform negatives).

Run through ``dglctl launch examples/train_dist_link.py -- --graph-name NAME`` or standalone
with ``--part-config`` of a 1-part partition. With ``--checkpoint-dir DIR`` it saves a checkpoint
(model, optimizers, the embedding table) every ``--checkpoint-every`` steps and, when started
again with the same arguments, goes on from the newest one; rank 0 ends with the final
``model checksum``.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
import torch as th
import torch.nn.functional as F

import runtime
from runtime import NID, DistEmbedding, DistGraph, NeighborSampler, checkpoint
from runtime.loader.edge_dataloader import DistEdgeDataLoader
from runtime.nn import SAGE
from runtime.optim import SparseAdam


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Area under the ROC curve from positive and negative scores (rank statistic)."""
    scores = np.concatenate([pos, neg])
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


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
    rank, world = th.distributed.get_rank(), th.distributed.get_world_size()
    th.manual_seed(args.seed)
    g = DistGraph(args.graph_name, part_config=args.part_config)
    num_edges = g.num_edges()
    # Hold out every 20th edge for validation; train on the rest, split among trainers.
    all_eids = np.arange(num_edges)
    val_mask = all_eids % 20 == 0
    train_eids = all_eids[~val_mask]
    train_eids = np.array_split(train_eids, world)[rank]
    emb = DistEmbedding(g.num_nodes(), args.emb_dim, name="node_emb",
                        init_func=lambda shape, dtype: th.empty(shape, dtype=dtype).uniform_(-0.1, 0.1))
    in_feats = g.ndata["feat"].shape[1] + args.emb_dim
    fanouts = [int(f) for f in args.fan_out.split(",")]
    model = SAGE(in_feats, args.num_hidden, args.num_hidden, len(fanouts), F.relu, 0.0)
    # Gradient buckets kept from the first step: a resumed run sums as the uninterrupted one
    # (see train_dist.py).
    model = th.nn.parallel.DistributedDataParallel(
        model.to(device), device_ids=[device] if device.type == "cuda" else None,
        find_unused_parameters=True)
    opt = th.optim.Adam(model.parameters(), lr=args.lr)
    emb_opt = SparseAdam([emb], lr=args.lr)
    sampler = NeighborSampler(fanouts, seed=args.seed)
    loader = DistEdgeDataLoader(g, train_eids, sampler, batch_size=args.batch_size,
                                negative_sampler=args.num_negs, exclude="self", shuffle=True,
                                seed=args.seed, device=device)

    def embed(blocks):
        nids = blocks[0].srcdata[NID]
        x = th.cat([g.ndata["feat"][nids], emb(nids)], dim=1)
        return model(blocks, x)

    def score(h, pair):
        s, d = pair.edges()
        # index_select, not h[s]: the gradient of h[s] is summed by a multi-threaded
        # index_put_ in no fixed order on the CPU, index_select's in a fixed one, so that two
        # runs (a resumed one and the uninterrupted one) end with the same bits.
        return (h.index_select(0, s) * h.index_select(0, d)).sum(1)

    # Resume from the newest checkpoint, if any. Only here, once everything is built: it
    # restores the random generators as they were after the saved step, so nothing may draw
    # from them between this load and the first resumed step (the embedding's init does).
    global_step = 0  # optimizer steps, across epochs
    losses = []  # the current epoch's, so far
    if args.checkpoint_dir:
        ckpt = checkpoint.load_latest(args.checkpoint_dir, model=model, optimizer=opt,
                                      sparse_optimizers=[emb_opt], embeddings=[emb])
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
            for _, pos, neg, blocks in loader:
                h = embed(blocks)
                ps, ns = score(h, pos), score(h, neg)
                loss = F.binary_cross_entropy_with_logits(
                    th.cat([ps, ns]), th.cat([th.ones_like(ps), th.zeros_like(ns)]))
                opt.zero_grad()
                emb_opt.zero_grad()
                loss.backward()
                opt.step()
                emb_opt.step()
                losses.append(loss.item())
                global_step += 1
                if args.checkpoint_dir and global_step % args.checkpoint_every == 0:
                    # The loader's state names the next batch: a resumed run starts there.
                    checkpoint.save(args.checkpoint_dir, global_step, model=model, optimizer=opt,
                                    sparse_optimizers=[emb_opt], embeddings=[emb],
                                    extra={"loader": loader.state_dict(), "step": global_step,
                                           "losses": losses})
        val = evaluate(g, embed, sampler, np.flatnonzero(val_mask), rank, world, args, device)
        if rank == 0:
            print(f"epoch {epoch}: loss {np.mean(losses):.4f}, val AUC {val:.4f}, "
                  f"time {time.perf_counter() - t0:.2f}s", flush=True)
    if rank == 0:
        print(f"model checksum {model_checksum(model.module)}", flush=True)
    th.distributed.destroy_process_group()


def evaluate(g, embed, sampler, val_eids, rank, world, args, device) -> float:
    """AUC of held-out edges against uniform negatives, pooled over every trainer."""
    mine = np.array_split(val_eids, world)[rank]
    loader = DistEdgeDataLoader(g, mine, sampler, batch_size=args.batch_size,
                                negative_sampler=1, seed=args.seed + 1, device=device)
    pos_s, neg_s = [], []
    with th.no_grad():
        for _, pos, neg, blocks in loader:
            h = embed(blocks)
            pos_s.append((h[pos.src] * h[pos.dst]).sum(1))
            neg_s.append((h[neg.src] * h[neg.dst]).sum(1))
    pos_all, neg_all = _gather(th.cat(pos_s), world), _gather(th.cat(neg_s), world)
    return auc(pos_all.cpu().numpy(), neg_all.cpu().numpy())


def _gather(t: th.Tensor, world: int) -> th.Tensor:
    """Every trainer's ``t`` (of any length), concatenated; on ``t``'s device (NCCL
    gathers device tensors, gloo CPU ones)."""
    if world == 1:
        return t
    dev = t.device
    sizes = [th.zeros(1, dtype=th.int64, device=dev) for _ in range(world)]
    th.distributed.all_gather(sizes, th.tensor([len(t)], device=dev))
    width = int(max(s.item() for s in sizes))
    padded = th.zeros(width, device=dev)
    padded[: len(t)] = t
    out = [th.zeros(width, device=dev) for _ in range(world)]
    th.distributed.all_gather(out, padded)
    return th.cat([o[: int(s.item())] for o, s in zip(out, sizes, strict=True)])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--graph-name", required=True)
    p.add_argument("--ip-config", default=None)
    p.add_argument("--part-config", default=None)
    p.add_argument("--num-epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--fan-out", default="5,10")
    p.add_argument("--num-hidden", type=int, default=32)
    p.add_argument("--emb-dim", type=int, default=8)
    p.add_argument("--num-negs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.005)
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
