"""Local 2-layer neighbour sampling [10, 25]: ours against DGL 1.1.3's, same graph, seeds, run.

    bench/dgl_env.sh                      # once: the DGL 1.1.3 venv (else ours is measured alone)
    python -m bench.sampling_vs_dgl [--nodes N] [--repeat R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import numpy as np

from bench.common import DGL_VENV, REPO, prepare_parts

FANOUTS = [10, 25]
GOAL = 1.5  # ours / DGL time, at most


def prepare(work: Path, nodes: int, avg_degree: float) -> tuple[Path, Path]:
    """Generate the graph into ``work/graph.npz`` and its 1-part partition (each unless present)."""
    npz, part_config = work / "graph.npz", work / "p1" / "bench.json"
    if npz.exists() and part_config.exists():
        return npz, part_config
    from partitioner.generate import generate_graph
    from partitioner.readers import write_npz

    t0 = time.perf_counter()
    graph = generate_graph(nodes, avg_degree=avg_degree, seed=0)
    write_npz(graph, npz)
    prepare_parts(graph, work, (1,))
    print(f"prepared graph and partition in {time.perf_counter() - t0:.1f}s", flush=True)
    return npz, part_config


class DglSampler:
    """``_dgl_sampler.py --serve`` in the DGL venv: one timed DGL call per ``measure()``."""

    def __init__(self, python: Path, npz: Path, seeds: Path, log: Path, threads: int) -> None:
        self._log_path = log
        self._log: IO[str] = open(log, "w")  # closed in close()
        self.proc = subprocess.Popen(
            [str(python), str(REPO / "bench" / "_dgl_sampler.py"), str(npz), str(seeds),
             "--fanouts", ",".join(map(str, FANOUTS)), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            env={**os.environ, "DGLBACKEND": "pytorch",
                 **({"OMP_NUM_THREADS": str(threads)} if threads > 0 else {})})
        self.info: dict[str, Any] = {}

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(30)
            self._log.flush()
            tail = self._log_path.read_text().strip().splitlines()[-15:]
            raise RuntimeError(f"DGL sampler exited with {self.proc.returncode}:\n  "
                               + "\n  ".join(tail))
        return json.loads(line)

    def wait_ready(self) -> dict[str, Any]:
        self.info = self._reply()
        return self.info

    def measure(self) -> tuple[float, int]:
        """(seconds, edges) of one DGL ``sample_blocks`` call, timed inside the DGL process."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("1\n")
        self.proc.stdin.flush()
        reply = self._reply()
        return reply["ms"] / 1e3, int(reply["edges"])

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def line(name: str, secs: float, edges: int, batch: int) -> str:
    return (f"  {name:<24} {secs * 1e3 * 1000 / batch:9.2f} {edges:>9,} "
            f"{batch / secs:>12,.0f} {edges / secs / 1e6:>9.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=10,
                    help="interleaved rounds (ours, DGL, ours, DGL, ...); medians are reported")
    ap.add_argument("--batch", type=int, default=1000, help="seed nodes per call")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="graph, partition and seeds (kept and reused; default: a folder in "
                         "the temp dir named after --nodes and --avg-degree)")
    ap.add_argument("--dgl-python", type=Path, default=DGL_VENV / "bin" / "python",
                    help="python of the DGL 1.1.3 venv (made by bench/dgl_env.sh)")
    ap.add_argument("--dgl-threads", type=int, default=1,
                    help="OMP_NUM_THREADS of the DGL process (ours is single-threaded); 0: "
                         "DGL's default, all cores - on 2 shared cores its OpenMP barriers "
                         "can make it 10x slower while another process runs")
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = ap.parse_args()

    work = args.workdir or Path(tempfile.gettempdir()) / (
        f"dglctl-sampling-vs-dgl-{args.nodes}-d{args.avg_degree:g}")
    work.mkdir(parents=True, exist_ok=True)
    npz, part_config = prepare(work, args.nodes, args.avg_degree)
    rng = np.random.default_rng(0)
    seeds = rng.choice(args.nodes, args.batch, replace=False)
    seeds_path = work / "seeds.npy"
    np.save(seeds_path, seeds)

    dgl: DglSampler | None = None
    if args.dgl_python.exists():
        dgl = DglSampler(args.dgl_python, npz, seeds_path, work / "dgl_sampler.log",
                         args.dgl_threads)
    else:
        print(f"DGL 1.1.3 venv not found ({args.dgl_python}); measuring ours alone. Create it "
              f"with:\n  bench/dgl_env.sh   (or DGL_VENV=DIR bench/dgl_env.sh, then "
              f"--dgl-python DIR/bin/python)", flush=True)

    import runtime as dg
    from partitioner.loader import load_orig_ids
    from runtime.sampling.neighbor import NeighborSampler

    dg.initialize()
    g = dg.DistGraph("bench", part_config=str(part_config))
    relabeled = np.argsort(load_orig_ids(g.config)[0]["_N"])[seeds]
    sampler = NeighborSampler(FANOUTS)

    def ours() -> tuple[float, int]:
        t0 = time.perf_counter()
        blocks = sampler.sample_blocks(relabeled, g)
        secs = time.perf_counter() - t0
        return secs, sum(int(b.num_edges()) for b in blocks)

    ours()  # warm-up (DGL's process warms up itself before it says it is ready)
    status = 0
    if dgl is not None:
        try:
            dgl.wait_ready()
        except RuntimeError as exc:
            print(f"{exc}\nmeasuring ours alone", flush=True)
            dgl.close()
            dgl, status = None, 1

    ours_runs: list[tuple[float, int]] = []
    dgl_runs: list[tuple[float, int]] = []
    try:
        for _ in range(args.repeat):
            ours_runs.append(ours())
            if dgl is not None:
                dgl_runs.append(dgl.measure())
    finally:
        if dgl is not None:
            dgl.close()

    def median(runs: list[tuple[float, int]]) -> tuple[float, int]:
        return float(np.median([s for s, _ in runs])), int(np.median([e for _, e in runs]))

    t_ours, e_ours = median(ours_runs)
    results: dict[str, Any] = {"nodes": g.num_nodes(), "edges": g.num_edges(),
                               "batch": args.batch, "fanouts": FANOUTS, "rounds": args.repeat,
                               "ours_ms": t_ours * 1e3, "ours_edges": e_ours,
                               "ours_seeds_s": args.batch / t_ours}
    print(f"graph {g.num_nodes():,} nodes, {g.num_edges():,} edges; {args.batch} seeds, "
          f"fanouts {FANOUTS}; median of {args.repeat} interleaved rounds")
    print(f"  {'':<24} {'ms/1000':>9} {'edges':>9} {'seeds/s':>12} {'Medges/s':>9}")
    print(line("ours (dglctl, 1 thread)", t_ours, e_ours, args.batch))
    if dgl_runs:
        t_dgl, e_dgl = median(dgl_runs)
        info = dgl.info if dgl is not None else {}
        name = f"DGL {info.get('dgl', '?')} ({info.get('threads', '?')} thr)"
        print(line(name, t_dgl, e_dgl, args.batch))
        ratio = t_ours / t_dgl
        verdict = "met" if ratio <= GOAL else "MISSED"
        print(f"  ratio ours/DGL time: {ratio:.2f}x (goal <= {GOAL}x: {verdict})")
        results.update({"dgl_ms": t_dgl * 1e3, "dgl_edges": e_dgl,
                        "dgl_seeds_s": args.batch / t_dgl, "dgl_threads": info.get("threads"),
                        "ratio": ratio})
    if args.json:
        print(json.dumps(results))
    return status


if __name__ == "__main__":
    sys.exit(main())
