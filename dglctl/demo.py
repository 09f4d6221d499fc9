"""The README's main command (``make demo``): generate a graph, partition it, show the report.

Until the launcher lands, the main job stops after partitioning; it will go on to launch
training on the local default cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .cli import main

DEMO_DIR = Path("demo-out")


def run() -> int:
    """Run the demo pipeline through the real CLI; returns the exit code."""
    steps = [
        ["generate", "--nodes", "50000", "--avg-degree", "16", "--seed", "0",
         "--out", str(DEMO_DIR / "demo.npz"), "--overwrite"],
        ["partition", "--input", str(DEMO_DIR / "demo.npz"), "--graph-name", "demo",
         "--num-parts", "2", "--balance-edges", "--out", str(DEMO_DIR / "parts"), "--overwrite"],
        ["inspect", str(DEMO_DIR / "parts")],
    ]
    for argv in steps:
        print(f"\n$ dglctl {' '.join(argv)}", flush=True)
        code = main(argv)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run())
