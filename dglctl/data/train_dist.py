"""Distributed GraphSAGE node classification, written like the DGL guide's example.

Only the imports differ from DGL's version: ``runtime`` stands in for ``dgl.distributed``.
Run it through ``dglctl launch examples/train_dist.py --graph-name NAME ...`` on a cluster,
or directly (standalone mode) on a 1-part partition:
``python examples/train_dist.py --graph-name demo --part-config parts1/demo.json``.

With ``--checkpoint-dir DIR`` it saves a checkpoint every ``--checkpoint-every`` steps and, when
started again with the same arguments, goes on from the newest one: the resumed run ends with
the model the uninterrupted run would have had (rank 0 prints its ``model checksum``).
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import runtime as dgl_distributed  # was: import dgl.distributed as dgl_distributed
from runtime import NID, DistDataLoader, DistGraph, NeighborSampler, checkpoint, node_split
from runtime.nn import SAGE


def load_subtensor(g, input_nodes, seeds):
    """Features of the input nodes and labels of the seed nodes of one mini-batch."""
    return g.ndata["feat"][input_nodes], g.ndata["label"][seeds]


def timed_allreduce_hook(clock, bucket):
    """DDP's own gradient all-reduce (``allreduce_hook``), timed for the epoch's time split.

    DDP calls this when a bucket of gradients is ready; this model fits in one bucket, so the
    all-reduce starts once backward has computed the last gradient, and ``backward()`` waits
    for it. From here to the future's completion is what a step spends in all-reduce, the wait
    for the slowest trainer included. (With several buckets the earlier ones overlap backward;
    keeping the last bucket's start counts only the part backward waits for.) Timing DDP's
    own all-reduce leaves the step as it was; a separate, timed all-reduce would add one.
    """
    clock["start"] = time.perf_counter()

    def done(fut):
        clock["end"] = time.perf_counter()
        return fut.value()

    return allreduce_hook(None, bucket).then(done)


def evaluate(g, model, nids, sampler, batch_size, device):
    """Accuracy on ``nids``, summed over every trainer (each evaluates its own share)."""
    model.eval()
    correct = th.zeros(2, dtype=th.float64)
    loader = DistDataLoader(nids.numpy(), batch_size, collate_fn=sampler.sample_blocks,
                            device=device)
    with th.no_grad():
        for blocks in loader:
            x, y = load_subtensor(g, blocks[0].srcdata[NID], blocks[-1].dstdata[NID])
            pred = model(blocks, x).argmax(1)
            correct += th.tensor([(pred == y).sum().item(), len(y)], dtype=th.float64)
    if th.distributed.is_initialized():
        correct = correct.to(device)  # (NCCL reduces device tensors)
        th.distributed.all_reduce(correct)
        correct = correct.cpu()
    model.train()
    return (correct[0] / correct[1].clamp(min=1)).item()


def cache_line(feat, seen):
    """``, feature cache hits P% of N remote rows`` for the epoch (the copies of other
    machines' rows this trainer keeps with feature_cache_gb), or "" without a cache;
    ``seen`` holds the counts before the epoch and is moved on."""
    stats = feat.cache_stats()
    if stats is None:
        return ""
    lookups, hits = stats.lookups - seen[0], stats.hits - seen[1]
    seen[:] = [stats.lookups, stats.hits]
    return f", feature cache hits {hits / max(1, lookups):.1%} of {lookups} remote rows"


def model_checksum(model):
    """sha256 (hex) of ``model``'s state_dict tensors, in key order: equal bits, equal sum."""
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(args):
    # initialize distributed contexts
    dgl_distributed.initialize(args.ip_config)
    # The launcher's GPU for this trainer with --num-gpus (cuda:LOCAL_RANK), else the CPU.
    device = dgl_distributed.device(args.device)
    if device.type == "cuda":
        th.cuda.set_device(device)
    backend = dgl_distributed.ddp_backend(device) if args.backend == "auto" else args.backend
    th.distributed.init_process_group(backend=backend)
    rank = th.distributed.get_rank()
    # load distributed graph
    g = DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    # get training workload, i.e., training node IDs
    train_nid = node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = node_split(g.ndata["test_mask"], pb, force_even=True)
    in_feats = g.ndata["feat"].shape[1]
    n_classes = int(g.ndata["label"][np.arange(g.num_nodes())].max()) + 1
    th.manual_seed(args.seed)

    # Create sampler
    fanouts = [int(f) for f in args.fan_out.split(",")]
    sampler = NeighborSampler(g, fanouts, dgl_distributed.sample_neighbors, "cpu",
                              seed=args.seed)
    dataloader = DistDataLoader(
        dataset=train_nid.numpy(),
        batch_size=args.batch_size,
        collate_fn=sampler.sample_blocks,
        shuffle=True,
        drop_last=False,
        seed=args.seed,
        device=device,  # batches (and the features pulled ahead) copied there
    )

    # Define model and optimizer
    model = SAGE(in_feats, args.num_hidden, n_classes, len(fanouts), F.relu, args.dropout)
    model = model.to(device)
    # find_unused_parameters keeps DDP's gradient buckets as they are at the first step;
    # without it DDP rebuilds them after the first step, so a run resumed from a checkpoint
    # would sum its first step's gradients in another order than the uninterrupted run (with
    # more than two trainers gloo's sums depend on a gradient's place in its bucket), and
    # end with another model, where with it the resumed model is the same bit for bit.
    model = th.nn.parallel.DistributedDataParallel(
        model, device_ids=[device] if device.type == "cuda" else None,
        find_unused_parameters=True)
    clock = {"start": 0.0, "end": 0.0}
    model.register_comm_hook(clock, timed_allreduce_hook)
    loss_fcn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    # Resume from the newest checkpoint, if any. Only here, once everything is built: it
    # restores the random generators as they were after the saved step, so nothing may draw
    # from them between this load and the first resumed step (building the model does).
    global_step = 0  # optimizer steps, across epochs
    losses = []  # the current epoch's, so far
    if args.checkpoint_dir:
        ckpt = checkpoint.load_latest(args.checkpoint_dir, model=model, optimizer=optimizer)
        if ckpt is not None:
            dataloader.load_state_dict(ckpt.extra["loader"])
            global_step, losses = ckpt.extra["step"], ckpt.extra["losses"]
            if rank == 0:
                at = ckpt.extra["loader"]
                print(f"resumed from checkpoint step {global_step} (epoch {at['epoch']}, "
                      f"batch {at['step']})", flush=True)
    resume_at = dataloader.state_dict()
    if args.checkpoint_dir and rank == 0:
        print(f"training from step {global_step}", flush=True)  # bench/restart_bench.py times it

    # training loop
    seen = [0, 0]  # the feature cache's lookups and hits before the epoch
    for epoch in range(resume_at["epoch"], args.num_epochs):
        # The resumed epoch's batches are numbered from where it resumes, as in the
        # uninterrupted run (``--max-steps`` counts them).
        first = resume_at["step"] if epoch == resume_at["epoch"] else 0
        if first == 0:
            losses = []
        t0 = time.perf_counter()
        times = {"sample": 0.0, "fetch": 0.0, "forward": 0.0, "backward": 0.0, "allreduce": 0.0}
        copied = dataloader.copy_time
        tick = time.perf_counter()
        with model.join():
            for step, blocks in enumerate(dataloader, start=first):
                if args.max_steps and step >= args.max_steps:
                    break
                t1 = time.perf_counter()
                batch_inputs, batch_labels = load_subtensor(
                    g, blocks[0].srcdata[NID], blocks[-1].dstdata[NID])
                t2 = time.perf_counter()
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, batch_labels)
                t3 = time.perf_counter()
                clock["start"] = clock["end"] = 0.0
                optimizer.zero_grad()
                loss.backward()  # DDP's gradient all-reduce happens here
                optimizer.step()
                t4 = time.perf_counter()
                allreduce = clock["end"] - clock["start"]
                times["sample"] += t1 - tick
                times["fetch"] += t2 - t1
                times["forward"] += t3 - t2
                times["backward"] += t4 - t3 - allreduce
                times["allreduce"] += allreduce
                losses.append(loss.item())
                global_step += 1
                if args.checkpoint_dir and global_step % args.checkpoint_every == 0:
                    # The loader's state names the next batch: a resumed run starts there.
                    t_save = time.perf_counter()
                    checkpoint.save(args.checkpoint_dir, global_step, model=model,
                                    optimizer=optimizer,
                                    extra={"loader": dataloader.state_dict(),
                                           "step": global_step, "losses": losses})
                    if rank == 0:
                        print(f"checkpoint step {global_step} saved in "
                              f"{time.perf_counter() - t_save:.3f}s", flush=True)
                tick = time.perf_counter()
        epoch_time = time.perf_counter() - t0
        cache = cache_line(g.ndata["feat"], seen)  # before evaluating: the epoch's own reads
        val_acc = (float("nan") if args.no_eval
                   else evaluate(g, model.module, val_nid, sampler, args.batch_size, device))
        if rank == 0:
            split = ", ".join(f"{k} {v:.2f}s" for k, v in times.items())
            if device.type != "cpu":  # the loader's copies: in sample, or on its thread
                split += f"; copy {dataloader.copy_time - copied:.2f}s to {device}"
            print(f"epoch {epoch}: loss {np.mean(losses):.4f}, val acc {val_acc:.4f}, "
                  f"time {epoch_time:.2f}s ({split}){cache}", flush=True)
    if not args.no_eval:
        test_acc = evaluate(g, model.module, test_nid, sampler, args.batch_size, device)
        if rank == 0:
            print(f"test accuracy {test_acc:.4f}", flush=True)
    if rank == 0:
        print(f"model checksum {model_checksum(model.module)}", flush=True)
    th.distributed.destroy_process_group()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--graph-name", required=True)
    p.add_argument("--ip-config", default=None, help="default: the launcher's")
    p.add_argument("--part-config", default=None, help="default: the launcher's")
    p.add_argument("--num-epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--fan-out", default="10,25")
    p.add_argument("--num-hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto: the GPU "
                   "the launcher gave this trainer (--num-gpus), else the CPU")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                   help="torch.distributed backend (auto: nccl on GPUs, gloo on CPUs)")
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many "
                   "steps (0: all); benchmarks use it")
    p.add_argument("--no-eval", action="store_true", help="skip validation/test (benchmarks)")
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
