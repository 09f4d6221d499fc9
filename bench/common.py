"""What several benchmarks share that is not a job: the repository, graphs and partitions,
timing, the machine's CPU counters, and the DGL venv of the side-by-side comparisons.

Kept light on purpose (the standard library and numpy): partition_bench's memory baseline is
a fresh process that imports its benchmark module, so nothing heavy may load here.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from partitioner.graph import Graph

REPO = Path(__file__).resolve().parents[1]

# DGL 1.1.3's figures on this machine (docs/reference.md), printed beside ours where DGL is not
# measured in the same run.
DGL_REFERENCE = {"sampling_seeds_s": 70_500, "pull_gbs": 1.52, "pull_remote_gbs": 0.93,
                 "epoch_s": 10.7}

# The DGL 1.1.3 venv of the side-by-side benchmarks (bench/dgl_env.sh's default, the same
# variable).
DGL_VENV = Path(os.environ.get("DGL_VENV", "/tmp/dgl-venv"))


def dgl_python() -> Path:
    """The DGL venv's python (bench/dgl_env.sh creates the venv the first time)."""
    out = subprocess.run(["bash", str(REPO / "bench" / "dgl_env.sh")], check=True,
                         stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def prepare_parts(graph: Graph | Callable[[], Graph], work: Path,
                  counts=(1, 2)) -> dict[int, Path]:
    """Partition ``graph`` into each of ``counts`` parts (kept when already there): the
    config of each, ``work/p{parts}/bench.json``, graph name ``bench``. ``graph`` may be a
    function that makes it, called only when a partition is missing."""
    from partitioner import partition_graph

    out = {}
    for parts in counts:
        cfg = work / f"p{parts}" / "bench.json"
        if not cfg.exists():
            if callable(graph):
                graph = graph()
            partition_graph(graph, "bench", parts, cfg.parent, overwrite=True)
        out[parts] = cfg
    return out


def timeit(fn, repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn`` after one untimed warm-up call."""
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def paired(fn_a, fn_b, pairs: int, setup=None) -> tuple[float, float]:
    """Median seconds of ``fn_a`` and ``fn_b`` timed in alternation (a, b, then b, a, ...),
    with ``setup()`` (untimed) before each pair.

    Timing one after the other lets the machine's noise (other jobs, frequency, the page
    cache) land on one side; alternating puts the same noise on both, so the ratio holds.
    """
    if setup is not None:
        setup()
    fn_a(), fn_b()  # warm-up
    ta, tb = [], []
    for i in range(pairs):
        if setup is not None:
            setup()
        order = ((fn_a, ta), (fn_b, tb)) if i % 2 == 0 else ((fn_b, tb), (fn_a, ta))
        for fn, times in order:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(np.median(ta)), float(np.median(tb))


def cpu_fields() -> list[int]:
    """The machine's CPU counters so far, in jiffies: /proc/stat's ``cpu`` line (user, nice,
    system, idle, iowait, irq, softirq, steal, guest, guest_nice)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far (busy: all but idle and iowait)."""
    fields = cpu_fields()
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)
