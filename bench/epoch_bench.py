"""Epoch benchmark: the GraphSAGE example on N loopback machines, DGL's distributed set-up.

Same work as the DGL 1.1.3 figures in docs/reference.md by default: generated 1M-node community
graph, 2 partitions, one server and one trainer per partition, GraphSAGE 2 layers hidden 64,
fanouts [10, 25], batch 1000, 50 steps per trainer. Prints the epoch time and its split
(sampling, feature fetch, forward, backward, gradient all-reduce), with docs/reference.md's DGL
figure for orientation (bench/dist_vs_dgl.py measures DGL in the same run). ``run_epoch`` is
what bench/figures.py calls for 1, 2 and 3 hosts.

    python -m bench.epoch_bench [--nodes N] [--hosts H] [--steps S]   (from the repository root)
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DGL_REFERENCE, prepare_parts
from bench.jobs import run_trainers

SPLIT = re.compile(r"(\w+) ([0-9.]+)s")


def parse_epoch_line(line: str) -> dict[str, Any]:
    """``epoch 0: loss L, val acc A, time Ts (sample a s, fetch b s, ...)`` as numbers."""
    m = re.search(r"loss ([0-9.na]+), .*time ([0-9.]+)s \((.*)\)", line)
    if m is None:
        raise ValueError(f"not an epoch line: {line!r}")
    return {"loss": float(m.group(1)), "epoch_s": float(m.group(2)),
            "split": {k: float(v) for k, v in SPLIT.findall(m.group(3))}}


def run_epoch(part_config: Path, work: Path, *, hosts: int, steps_per_trainer: int,
              batch_size: int = 1000, fan_out: str = "10,25", num_hidden: int = 64,
              num_samplers: int = 0, omp_threads: int = 1,
              timeout: float = 900.0, extra_args: list[str] | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """One epoch of examples/train_dist.py (``--max-steps``) on ``hosts`` loopback machines
    (127.0.0.1 ...), one server and one trainer each, started directly (no launcher).

    Each trainer runs ``omp_threads`` threads (1, as configs/local.yaml sets): every emulated
    host is then a one-core machine, until the real cores run out (3 hosts share this
    machine's 2). Several threads per trainer on a shared 2-core machine made the epoch time
    vary 2x from run to run (a busy core stalls every parallel region). Returns rank 0's epoch
    time and split, the seeds of the whole epoch (``hosts * steps_per_trainer * batch_size``)
    and seeds/s, and the start-to-finish seconds. ``extra_args`` go to the example too,
    ``env`` to the trainers' environment.
    """
    t0 = time.perf_counter()
    outs = run_trainers(part_config, work, [
        "examples/train_dist.py", "--graph-name", "bench", "--num-epochs", "1", "--batch-size",
        str(batch_size), "--fan-out", fan_out, "--num-hidden", str(num_hidden), "--max-steps",
        str(steps_per_trainer), "--no-eval", *(extra_args or [])], hosts=hosts,
        num_samplers=num_samplers, omp_threads=omp_threads, timeout=timeout, env=env)
    total = time.perf_counter() - t0
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("epoch 0"))
    r = parse_epoch_line(line)
    seeds = hosts * steps_per_trainer * batch_size
    return {**r, "hosts": hosts, "trainers": hosts, "steps_per_trainer": steps_per_trainer,
            "batch_size": batch_size, "seeds": seeds, "seeds_s": seeds / r["epoch_s"],
            "omp_threads": omp_threads, "start_to_finish_s": total, "line": line}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50, help="steps per trainer")
    ap.add_argument("--num-samplers", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    from partitioner.generate import generate_graph

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-epoch-"))
    cfg = prepare_parts(lambda: generate_graph(args.nodes, avg_degree=args.avg_degree, seed=0),
                        work, (args.hosts,))[args.hosts]
    r = run_epoch(cfg, work, hosts=args.hosts, steps_per_trainer=args.steps,
                  num_samplers=args.num_samplers)
    print(f"epoch ({args.steps} steps per trainer, {args.hosts} hosts, {args.num_samplers} "
          f"samplers): {r['line']}")
    print(f"epoch time {r['epoch_s']:.2f}s; start to finish incl. start-up "
          f"{r['start_to_finish_s']:.1f}s. (docs/reference.md's DGL 1.1.3 figure, another day: "
          f"{DGL_REFERENCE['epoch_s']}s; for a ratio against DGL measured in the same run, use "
          "python -m bench.dist_vs_dgl)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
