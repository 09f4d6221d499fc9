"""A tiny trainer for launcher tests; behaviour chosen by argv[1]:
ok | fail (exit 3 on rank 1) | sleep (until killed) | crash (traceback on rank 0)."""

import os
import sys
import time

import numpy as np

import runtime

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
runtime.initialize()
g = runtime.DistGraph(sys.argv[2] if len(sys.argv) > 2 else "g")
rank = int(os.environ["RANK"])
feat = g.ndata["feat"][np.arange(g.num_nodes())]
print(f"rank {rank}/{os.environ['WORLD_SIZE']} pulled {tuple(feat.shape)}", flush=True)
if mode == "fail" and rank == 1:
    print("rank 1 giving up", flush=True)
    sys.exit(3)
if mode == "crash" and rank == 0:
    raise RuntimeError("deliberate crash in the training script")
if mode == "sleep":
    # A loader with sampler processes (the cluster's samplers_per_trainer): what a stop must
    # clean up after, the socket folder included, when it kills the trainer.
    loader = runtime.DistDataLoader(np.arange(100), 10, collate_fn=lambda ids: ids)
    next(iter(loader))
    print("sleeping", flush=True)
    time.sleep(600)
print("done", flush=True)
