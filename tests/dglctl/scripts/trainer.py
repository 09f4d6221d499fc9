"""A tiny trainer for launcher tests; behaviour chosen by argv[1]:
ok | fail (exit 3 on rank 1) | sleep (until killed) | crash (traceback on rank 0) |
fail-once (exit 3 on rank 1 in the first attempt only) | raise-at-batch (rank 1 raises on
batch 2 of its loader's first epoch, in every attempt) | sleep-once (sleep in the first
attempt, finish in the next) | cache-sleep (read the other machine's rows through a feature
cache, then sleep) | barrier-restart, sparse-restart, tensor-restart (rank 1 fails in the
first attempt while a barrier, an optimizer step or a named tensor is on the servers)."""

import os
import sys
import time

import numpy as np

import runtime

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
runtime.initialize()
g = runtime.DistGraph(sys.argv[2] if len(sys.argv) > 2 else "g")
rank = int(os.environ["RANK"])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
feat = g.ndata["feat"][np.arange(g.num_nodes())]
print(f"rank {rank}/{os.environ['WORLD_SIZE']} pulled {tuple(feat.shape)} in attempt {attempt}",
      flush=True)
print(f"rank {rank} feature sum {float(feat.sum()):.6f}", flush=True)
if mode == "fail-once" and rank == 1 and attempt == 0:
    print("rank 1 giving up in the first attempt", flush=True)
    sys.exit(3)
if mode == "raise-at-batch" and rank == 1:
    for i, _ in enumerate(runtime.DistDataLoader(np.arange(50), 10)):
        if i == 2:
            raise ValueError(f"deliberate bug on batch {i} (attempt {attempt})")
if mode == "barrier-restart":
    # A barrier every step; rank 1 fails after its 5th in the first attempt, leaving the other
    # trainers' arrivals at the 6th on the server.
    for step in range(1, 13):
        g.barrier()
        if attempt == 0 and rank == 1 and step == 5:
            print("rank 1 fails between barriers", flush=True)
            sys.exit(3)
    print(f"rank {rank} passed 12 barriers in attempt {attempt}", flush=True)
if mode == "sparse-restart":
    # A collective sparse optimizer step each step; rank 1 fails before its 3rd in the first
    # attempt, so the other trainers' shares of it wait on the server.
    import torch

    from runtime.optim import SparseAdagrad

    emb = runtime.DistEmbedding(g.num_nodes(), 4, name="emb",
                                init_func=lambda shape, dtype: torch.zeros(shape, dtype=dtype))
    opt = SparseAdagrad([emb], lr=0.1)
    ids = torch.arange(g.num_nodes())
    for step in range(1, 6):
        if attempt == 0 and rank == 1 and step == 3:
            print("rank 1 fails before its optimizer step", flush=True)
            sys.exit(3)
        emb(ids).sum().backward()
        opt.step()
    g.barrier()
    rows = emb.weight[np.arange(g.num_nodes())]
    print(f"rank {rank} embedding sum {float(rows.sum()):.4f} in attempt {attempt}", flush=True)
if mode == "tensor-restart":
    # A named tensor and a persistent one: the first attempt writes both, then rank 1 fails;
    # the next attempt's named tensor starts anew (zeros), the persistent one is still there.
    import torch

    zeros = lambda shape, dtype: torch.zeros(shape, dtype=dtype)  # noqa: E731
    scratch = runtime.DistTensor((g.num_nodes(), 2), torch.float32, "scratch", init_func=zeros)
    kept = runtime.DistTensor((g.num_nodes(), 2), torch.float32, "kept", init_func=zeros,
                              persistent=True)
    if attempt == 0:
        if rank == 0:
            scratch[np.arange(g.num_nodes())] = torch.ones(g.num_nodes(), 2)
            kept[np.arange(g.num_nodes())] = torch.full((g.num_nodes(), 2), 7.0)
        g.barrier()
        if rank == 1:
            print("rank 1 fails after the writes", flush=True)
            sys.exit(3)
        time.sleep(600)  # until the launcher stops this attempt
    every = np.arange(g.num_nodes())
    print(f"rank {rank} scratch sum {float(scratch[every].sum()):.1f} kept sum "
          f"{float(kept[every].sum()):.1f} in attempt {attempt}", flush=True)
if mode == "fail" and rank == 1:
    print("rank 1 giving up", flush=True)
    sys.exit(3)
if mode == "crash" and rank == 0:
    raise RuntimeError("deliberate crash in the training script")
if mode == "cache-sleep":
    # What a loader does for its features (BatchReads.learn), then reads with hits: the last
    # read comes after the report interval, so the counters the server holds include hits.
    from runtime.feature_cache import REPORT_SECONDS, WARMUP_PULLS

    t = g.ndata["feat"]
    t.store.want_cache(t.kvstore_key)
    for _ in range(WARMUP_PULLS + 2):
        t[np.arange(g.num_nodes())]
    time.sleep(REPORT_SECONDS)
    t[np.arange(g.num_nodes())]
    print(f"rank {rank} cache {t.cache_stats()}", flush=True)
if mode in ("sleep", "cache-sleep") or (mode == "sleep-once" and attempt == 0):
    # A loader with sampler processes (the cluster's samplers_per_trainer): what a stop must
    # clean up after, the socket folder included, when it kills the trainer.
    loader = runtime.DistDataLoader(np.arange(100), 10, collate_fn=lambda ids: ids)
    next(iter(loader))
    print("sleeping", flush=True)
    time.sleep(600)
print("done", flush=True)
