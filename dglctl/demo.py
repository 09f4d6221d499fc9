"""The README's main command (``make demo``): generate, partition, launch, train, report.

Generates a 20k-node community graph, partitions it into 2 parts with METIS, and launches the
GraphSAGE example on the local default cluster (configs/local.yaml: 2 machines on loopback,
2 trainers each, 1 sampler process per trainer). The trainers print per-epoch loss and
validation accuracy, then the test accuracy; nothing is left running afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .cli import main

DEMO_DIR = Path("demo-out")
# The demo's script and cluster are package data (examples/train_dist.py and
# configs/local.yaml link to them), so the demo runs from an installed dglctl too.
DATA = Path(__file__).resolve().parent / "data"


def run() -> int:
    """Run the demo pipeline through the real CLI; returns the exit code."""
    steps = [
        ["generate", "--nodes", "20000", "--avg-degree", "12", "--seed", "0",
         "--out", str(DEMO_DIR / "demo.npz"), "--overwrite"],
        ["partition", "--input", str(DEMO_DIR / "demo.npz"), "--graph-name", "demo",
         "--num-parts", "2", "--balance-edges", "--out", str(DEMO_DIR / "parts"), "--overwrite"],
        ["launch", "--cluster", str(DATA / "local.yaml"), "--part-config",
         str(DEMO_DIR / "parts" / "demo.json"), str(DATA / "train_dist.py"),
         "--graph-name", "demo", "--num-epochs", "3", "--batch-size", "500", "--lr", "0.01"],
    ]
    for argv in steps:
        print(f"\n$ dglctl {' '.join(argv)}", flush=True)
        code = main(argv)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run())
