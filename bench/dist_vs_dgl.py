"""A DGL user's script on DGL 1.1.3 and on dglctl, alternating in one run, on the same graph.

The script is bench/scripts/dist_bench.py, written for DGL (sampling, feature pull and
training phases; GraphSAGE from ``SAGEConv``). DGL runs it as it is, in its distributed mode
(bench/_dgl_dist.py: DGL's own launch environment, each emulated machine in a mount namespace
with a private /dev/shm); dglctl runs the copy with only its imports changed
(bench/dgl_imports.py) through ``dglctl launch``. Both serve the same parts: DGL's
``partition_graph`` is handed dglctl's METIS assignment. Set-up: a generated 1M-node
community graph with 128 float32 features per node, 2 machines on loopback (127.0.0.1,
127.0.0.2), 1 server + 1 trainer each, no sampler processes, one thread per process,
fanouts [10, 25], batch 1000.

Each round runs DGL then dglctl (or the reverse, every other round); ratios are per round
(dglctl over DGL of the same round), then median and range over the rounds. Goals (issue 11):
epoch time at most 0.5x DGL's, sampling rate at least 2.5x, pull rate at least 2x, test
accuracy and loss curve at parity (round i seeds both models with i). Needs root (unshare,
mount) and the DGL venv (bench/dgl_env.sh, created on first use).

    python -m bench.dist_vs_dgl                      # 1M nodes, 3 rounds
    python -m bench.dist_vs_dgl --nodes 200000 --rounds 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.common import REPO, dgl_python
from bench.dgl_imports import write_runtime_variant
from bench.jobs import cli_env, free_base

SCRIPT = REPO / "bench" / "scripts" / "dist_bench.py"
IPS = ["127.0.0.1", "127.0.0.2"]
# (label, path in the DIST_BENCH result, "time" if smaller is better else "rate", goal)
FIGURES = [
    ("epoch s", ("train", "epoch_s"), "time", 0.5),
    ("sampling seeds/s", ("sampling", "seeds_s"), "rate", 2.5),
    ("pull GB/s", ("pull", "gb_s"), "rate", 2.0),
    ("forward s", ("train", "split", "forward"), "time", None),
    ("backward s", ("train", "split", "backward"), "time", None),
    ("sample s (in epoch)", ("train", "split", "sample"), "time", None),
    ("fetch s (in epoch)", ("train", "split", "fetch"), "time", None),
    ("start to finish s", ("wall_s",), "time", None),
]


def prepare(work: Path, nodes: int, avg_degree: float, feat_dim: int,
            dgl_py: Path) -> dict[str, Path]:
    """The graph (.npz), dglctl's 2 parts and DGL's 2 parts of the same assignment."""
    from partitioner import partition_graph
    from partitioner.generate import generate_graph
    from partitioner.loader import load_orig_ids
    from partitioner.readers.npz import write_npz

    npz, ours, dgl = work / "graph.npz", work / "ours" / "bench.json", work / "dgl" / "bench.json"
    if not ours.exists():
        t0 = time.perf_counter()
        graph = generate_graph(nodes, avg_degree=avg_degree, feat_dim=feat_dim, seed=0)
        write_npz(graph, npz)
        config = partition_graph(graph, "bench", len(IPS), ours.parent, overwrite=True)
        orig = np.asarray(load_orig_ids(config)[0]["_N"], dtype=np.int64)
        parts = np.empty(nodes, dtype=np.int64)
        for p, (lo, hi) in enumerate(config["node_map"]["_N"]):
            parts[orig[lo:hi]] = p
        np.save(work / "assignment.npy", parts)
        print(f"graph and dglctl's parts in {time.perf_counter() - t0:.1f}s", flush=True)
    if not dgl.exists():
        t0 = time.perf_counter()
        subprocess.run([str(dgl_py), str(REPO / "bench" / "_dgl_dist.py"), "partition",
                        str(npz), str(work / "assignment.npy"), str(dgl.parent)],
                       check=True, env={**os.environ, "DGLBACKEND": "pytorch"})
        print(f"DGL's parts in {time.perf_counter() - t0:.1f}s", flush=True)
    return {"npz": npz, "ours": ours, "dgl": dgl}


def parse_result(output: str, who: str) -> dict[str, Any]:
    """The ``DIST_BENCH {json}`` line of a run's output."""
    for line in output.splitlines():
        if "DIST_BENCH " in line:
            return json.loads(line.split("DIST_BENCH ", 1)[1])
    raise RuntimeError(f"{who}: no DIST_BENCH line in its output:\n{output[-3000:]}")


def run_dgl(work: Path, dgl_py: Path, part_config: Path, script_args: list[str],
            timeout: float) -> dict[str, Any]:
    """One run of the script under DGL: two emulated machines, each in its own namespace."""
    ip_config = work / "dgl_ip_config.txt"
    port = free_base(IPS, 1)
    ip_config.write_text("".join(f"{ip} {port}\n" for ip in IPS))
    env = {**os.environ, "DGLBACKEND": "pytorch", "PYTHONPATH": "",
           "BENCH_MASTER_PORT": str(free_base(["127.0.0.1"], 1))}
    mount = 'mount -t tmpfs -o size=16g tmpfs /dev/shm && exec "$@"'
    procs, logs = [], []
    t0 = time.perf_counter()
    for m in range(len(IPS)):
        log = open(work / f"dgl_m{m}.log", "w+")  # closed below
        logs.append(log)
        procs.append(subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", mount, "bash",
             str(dgl_py), str(REPO / "bench" / "_dgl_dist.py"), "machine", str(m),
             str(ip_config), str(part_config), str(SCRIPT), "--ip_config", str(ip_config),
             "--part_config", str(part_config), *script_args],
            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    try:
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    wall = time.perf_counter() - t0
    outs = []
    for log in logs:
        log.seek(0)
        outs.append(log.read())
        log.close()
    if any(codes):
        raise RuntimeError(f"DGL run failed (exit codes {codes}):\n{outs[0][-3000:]}\n"
                           f"{outs[1][-3000:]}")
    return {**parse_result(outs[0], "DGL"), "wall_s": wall}


def run_ours(work: Path, part_config: Path, script_args: list[str],
             timeout: float) -> dict[str, Any]:
    """One run of the script's runtime copy through ``dglctl launch`` on the local cluster."""
    variant = write_runtime_variant(SCRIPT, work / "dist_bench.py")
    cluster = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    cluster.update(workspace=str(work / "ws"), port_base=random.randint(20000, 50000),
                   trainers_per_host=1, samplers_per_trainer=0, servers_per_host=1)
    cluster["env"] = {**cluster.get("env", {}), "OMP_NUM_THREADS": "1"}
    (work / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    env = cli_env(work)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dglctl", "-q", "launch", str(variant), "--cluster",
         str(work / "cluster.yaml"), "--part-config", str(part_config), "--", *script_args],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=timeout)
    wall = time.perf_counter() - t0
    (work / "ours.log").write_text(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"dglctl run failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return {**parse_result(proc.stdout, "dglctl"), "wall_s": wall}


def figure(result: dict[str, Any], path: tuple[str, ...]) -> float:
    """The number at ``path`` in a DIST_BENCH result."""
    value: Any = result
    for key in path:
        value = value[key]
    return float(value)


def final_loss(result: dict[str, Any], last: int = 10) -> float:
    """Mean training loss over the last ``last`` steps."""
    return float(np.mean(result["train"]["losses"][-last:]))


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per figure: both sides' values, dglctl/DGL per round (for a time lower is better, for
    a rate higher), their median, and whether the goal is met."""
    out: dict[str, Any] = {}
    for label, path, kind, goal in FIGURES:
        dgl = [figure(r["dgl"], path) for r in rounds]
        ours = [figure(r["ours"], path) for r in rounds]
        ratios = [o / d for o, d in zip(ours, dgl, strict=True)]
        entry = {"dgl": dgl, "dglctl": ours, "ratio": ratios,
                 "ratio_median": statistics.median(ratios), "kind": kind, "goal": goal}
        if goal is not None:
            med = entry["ratio_median"]
            entry["goal_met"] = med <= goal if kind == "time" else med >= goal
        out[label] = entry
    for label, fn in (("test acc", lambda r: float(r["test_acc"])), ("final loss", final_loss)):
        dgl = [fn(r["dgl"]) for r in rounds]
        ours = [fn(r["ours"]) for r in rounds]
        out[label] = {"dgl": dgl, "dglctl": ours, "difference": [
            o - d for o, d in zip(ours, dgl, strict=True)]}
    return out


def print_summary(summary: dict[str, Any]) -> None:
    """One line per figure: medians, the per-round ratios and the goal."""
    print(f"{'figure':<22}{'DGL median':>12}{'dglctl median':>15}  dglctl/DGL per round  goal")
    for label, e in summary.items():
        d, o = statistics.median(e["dgl"]), statistics.median(e["dglctl"])
        if "ratio" in e:
            rs = " ".join(f"{r:.2f}" for r in e["ratio"])
            goal = ""
            if e["goal"] is not None:
                sign = "<=" if e["kind"] == "time" else ">="
                goal = f"{sign} {e['goal']} {'met' if e['goal_met'] else 'NOT met'}"
            print(f"{label:<22}{d:>12.3f}{o:>15.3f}  {rs:<20}  {goal}")
        else:
            diffs = " ".join(f"{x:+.3f}" for x in e["difference"])
            print(f"{label:<22}{d:>12.3f}{o:>15.3f}  difference {diffs}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--feat-dim", type=int, default=128, help="node feature size (float32)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50, help="training steps per trainer")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keeps the graph and both partitions between runs")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("error: needs root (unshare --mount and a private /dev/shm for DGL's machines)",
              file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-vs-dgl-"))
    work.mkdir(parents=True, exist_ok=True)
    dgl_py = dgl_python()
    paths = prepare(work, args.nodes, args.avg_degree, args.feat_dim, dgl_py)
    rounds = []
    for i in range(args.rounds):
        # Each round starts both sides from its own model seed: one initialization per side
        # would make a loss difference that is only the luck of one draw look systematic.
        script_args = ["--graph_name", "bench", "--steps", str(args.steps), "--seed", str(i)]
        order = ["dgl", "ours"] if i % 2 == 0 else ["ours", "dgl"]
        r: dict[str, dict[str, Any]] = {}
        for who in order:
            if who == "dgl":
                r[who] = run_dgl(work, dgl_py, paths["dgl"], script_args, args.timeout)
            else:
                r[who] = run_ours(work, paths["ours"], script_args, args.timeout)
            print(f"round {i + 1} {who}: epoch {r[who]['train']['epoch_s']:.2f}s, sampling "
                  f"{r[who]['sampling']['seeds_s']:.0f} seeds/s, pull "
                  f"{r[who]['pull']['gb_s']:.2f} GB/s, acc {r[who]['test_acc']:.3f}, "
                  f"wall {r[who]['wall_s']:.1f}s", flush=True)
        rounds.append(r)
    summary = summarize(rounds)
    (work / "dist_vs_dgl.json").write_text(json.dumps({"rounds": rounds, "summary": summary}))
    if args.json:
        print(json.dumps(summary))
    else:
        print_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
