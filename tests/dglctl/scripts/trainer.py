"""A tiny trainer for launcher tests; behaviour chosen by argv[1]:
ok | fail (exit 3 on rank 1) | sleep (until killed) | crash (traceback on rank 0) |
fail-once (exit 3 on rank 1 in the first attempt only) | raise-at-batch (rank 1 raises on
batch 2 of its loader's first epoch, in every attempt) | sleep-once (sleep in the first
attempt, finish in the next) | cache-sleep (read the other machine's rows through a feature
cache, then sleep)."""

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
