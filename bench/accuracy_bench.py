"""Accuracy parity: examples/train_dist.py in one process on the standalone DistGraph (1 part)
against 2 parts x 2 trainers launched by `dglctl launch` on a local 2-host cluster (one sampler
process per trainer, like configs/local.yaml). Same graph, seed, epochs, fan-out, learning rate
and global batch (each of the 4 trainers takes a quarter). Goal: within 1 point of test accuracy.

    python -m bench.accuracy_bench [--nodes N] [--epochs E]   (from the repository root)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, prepare_parts
from bench.jobs import cli_env, local_cluster_file


def _accuracy(out: str) -> float:
    m = re.search(r"test accuracy ([0-9.]+)", out)
    if m is None:
        raise RuntimeError(f"no 'test accuracy' line in:\n{out[-2000:]}")
    return float(m.group(1))


def measure_parity(p1: Path, p2: Path, work: Path, *, epochs: int = 2, batch_size: int = 1000,
                   fan_out: str = "10,25", lr: float = 0.003, trainers_per_host: int = 2,
                   timeout: float = 3600.0) -> dict[str, Any]:
    """Test accuracy of the single-process run on ``p1`` and of the launched run on ``p2``
    (2 hosts x ``trainers_per_host``), and their difference in points."""
    world = 2 * trainers_per_host
    if batch_size % world:
        raise ValueError(f"batch size {batch_size} does not split over {world} trainers")
    args = ["--graph-name", "bench", "--num-epochs", str(epochs), "--fan-out", fan_out,
            "--lr", str(lr), "--seed", "0"]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "examples/train_dist.py", *args, "--batch-size",
                           str(batch_size), "--part-config", str(p1)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"standalone training exited {proc.returncode}: {proc.stderr[-2000:]}")
    single, single_s = _accuracy(proc.stdout), time.perf_counter() - t0
    cluster = local_cluster_file(work / "parity-cluster.yaml", trainers=trainers_per_host,
                                 samplers=1)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dglctl", "-q", "launch",
                           str(REPO / "examples" / "train_dist.py"), "--cluster", str(cluster),
                           "--part-config", str(p2), "--", *args, "--batch-size",
                           str(batch_size // world)], capture_output=True, text=True,
                          env=cli_env(work), timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"launched training exited {proc.returncode}: "
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    dist, dist_s = _accuracy(proc.stdout), time.perf_counter() - t0
    diff = 100.0 * (dist - single)
    return {"single_acc": single, "dist_acc": dist, "diff_points": diff,
            "within_1_point": abs(diff) <= 1.0, "epochs": epochs, "global_batch": batch_size,
            "trainers": world, "fan_out": fan_out, "lr": lr, "single_s": single_s,
            "dist_s": dist_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    from partitioner.generate import generate_graph

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-parity-"))
    work.mkdir(parents=True, exist_ok=True)
    parts = prepare_parts(generate_graph(args.nodes, avg_degree=args.avg_degree, seed=0), work)
    r = measure_parity(parts[1], parts[2], work, epochs=args.epochs)
    print(f"test accuracy: single process {r['single_acc']:.4f}, 2 parts x 2 trainers "
          f"{r['dist_acc']:.4f}; difference {r['diff_points']:+.2f} points (goal within 1: "
          f"{'yes' if r['within_1_point'] else 'NO'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
