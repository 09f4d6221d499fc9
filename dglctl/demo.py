"""The README's main command (``make demo``): generate, partition, launch, train, report.

Generates a 20k-node community graph, partitions it into 2 parts with METIS, and launches the
GraphSAGE example on the local default cluster (configs/local.yaml: 2 machines on loopback,
2 trainers each, 1 sampler process per trainer). Where torch sees GPUs, the trainers train
on them (``launch --num-gpus``: the machine's GPUs, round robin over the 4 trainers). The
trainers print per-epoch loss and validation accuracy, then the test accuracy; nothing is
left running afterwards.

``python -m dglctl.demo [--out DIR]`` works from any folder, in a clone or after
``pip install``: the graph and its partitions go to DIR (default ``demo-out`` in the current
folder), the hosts' workspaces below the local cluster's ``workspace`` (``/tmp/dglctl-local``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import main

DEMO_DIR = Path("demo-out")
# The demo's script and cluster are package data (examples/train_dist.py and
# configs/local.yaml link to them), so the demo runs from an installed dglctl too.
DATA = Path(__file__).resolve().parent / "data"


def run(out: Path = DEMO_DIR) -> int:
    """Run the demo pipeline through the real CLI, writing its files below ``out``; returns
    the exit code. The launch step leaves out --cluster: the default is the package's own."""
    print(f"dglctl demo: graph and partitions in {out.resolve()}", flush=True)
    gpus = local_gpus()
    on_gpus = ["--num-gpus", str(gpus)] if gpus else []
    print(f"dglctl demo: {f'{gpus} GPU(s): trainers on them' if gpus else 'CPU trainers'}",
          flush=True)
    steps = [
        ["generate", "--nodes", "20000", "--avg-degree", "12", "--seed", "0",
         "--out", str(out / "demo.npz"), "--overwrite"],
        ["partition", "--input", str(out / "demo.npz"), "--graph-name", "demo",
         "--num-parts", "2", "--balance-edges", "--out", str(out / "parts"), "--overwrite"],
        ["launch", "--part-config", str(out / "parts" / "demo.json"), *on_gpus,
         str(DATA / "train_dist.py"),
         "--graph-name", "demo", "--num-epochs", "3", "--batch-size", "500", "--lr", "0.01"],
    ]
    for argv in steps:
        print(f"\n$ dglctl {' '.join(argv)}", flush=True)
        code = main(argv)
        if code != 0:
            return code
    return 0


def local_gpus() -> int:
    """The GPUs this machine's torch can train on (0 without a CUDA build or a GPU)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def command_line(argv: list[str] | None = None) -> int:
    """``python -m dglctl.demo [--out DIR]``: parse the arguments and run the demo."""
    parser = argparse.ArgumentParser(
        prog="python -m dglctl.demo",
        description="Generate a graph, partition it and train GraphSAGE on the local cluster.")
    parser.add_argument("--out", type=Path, default=DEMO_DIR, metavar="DIR",
                        help="folder for the graph and its partitions [default: ./demo-out]")
    return run(parser.parse_args(argv).out)


if __name__ == "__main__":
    sys.exit(command_line())
