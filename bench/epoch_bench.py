"""Epoch benchmark: the GraphSAGE example on 2 loopback machines, DGL's distributed set-up.

Same work as the DGL 1.1.3 figures in REFERENCE.md: generated 1M-node community graph, 2
partitions, one server and one trainer per partition, GraphSAGE 2 layers hidden 64, fanouts
[10, 25], batch 1000, 50 steps per trainer. Prints the epoch time and its split (sampling,
feature fetch, forward, backward with all-reduce) next to DGL's 10.7 s measured here.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.runtime_bench import DGL, Servers, free_base  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--num-samplers", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    from partitioner import partition_graph
    from partitioner.generate import generate_graph

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-epoch-"))
    cfg = work / "p2" / "bench.json"
    if not cfg.exists():
        partition_graph(generate_graph(args.nodes, avg_degree=args.avg_degree, seed=0),
                        "bench", 2, work / "p2", overwrite=True)
    servers = Servers(cfg, 1, work)
    master = free_base(["127.0.0.1"], 1)
    t0 = time.perf_counter()
    trainers = []
    try:
        for rank in range(2):
            env = servers.env("trainer", rank)
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(master), DGLCTL_NUM_SAMPLERS=str(args.num_samplers),
                       OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 2) // 2)))
            trainers.append(subprocess.Popen(
                [sys.executable, "examples/train_dist.py", "--graph-name", "bench",
                 "--num-epochs", "1", "--batch-size", "1000", "--fan-out", "10,25",
                 "--num-hidden", "64", "--max-steps", str(args.steps), "--no-eval"],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=900) for p in trainers]
    finally:
        servers.stop()
    total = time.perf_counter() - t0
    for p, (_, err) in zip(trainers, outs, strict=True):
        if p.returncode != 0:
            print(err, file=sys.stderr)
            return 1
    line = next(ln for ln in outs[0][0].splitlines() if ln.startswith("epoch 0"))
    epoch = float(re.search(r"time ([0-9.]+)s", line).group(1))
    print(f"epoch ({args.steps} steps per trainer, {args.num_samplers} samplers): {line}")
    print(f"epoch time {epoch:.2f}s vs DGL 1.1.3 {DGL['epoch_s']}s here: ratio "
          f"{epoch / DGL['epoch_s']:.2f} (goal <= 0.67); start to finish incl. start-up "
          f"{total:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
