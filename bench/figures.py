"""Every figure of the project in one command (issue 5), each against its baseline measured in
the same run, printed with the ratio, and written as JSON, a markdown table and PNG plots.

    python -m bench.figures [--quick | --smoke] [--out DIR]   (or: make figures)

Figures, run one after the other (never two at once: the machine is small):
  partition  whole `dglctl partition` (4 parts, METIS, 3 constraints) vs the METIS call alone:
             phase times, ratio, peak memory (vs METIS alone with its input), edge cut (vs a
             random assignment); bench/partition_bench.py
  sampling   [10, 25] on 1000 seeds through the servers vs local in-process: seeds/s, edges/s
  pull       10k remote feature rows vs a bare pyzmq round trip of the same bytes (GB/s), and
             local rows vs numpy fancy indexing; bench/runtime_bench.py
  training   one epoch of examples/train_dist.py on 1, 2 and 3 loopback hosts (one server and
             one single-threaded trainer each), the same global work (the same total seeds:
             global steps x batch 1000, split evenly over the trainers), split into sampling,
             feature fetch, forward, backward and all-reduce; baseline: 1 host;
             bench/epoch_bench.py
  launch     `dglctl launch` (local transport) to the first training step vs the same processes
             started directly; `dglctl stop` until nothing runs (verified) vs a plain SIGTERM;
             the same over SSH when root and sshd are there; bench/launch_bench.py
  parity     test accuracy, single process on the standalone DistGraph vs 2 parts x 2 trainers
             launched, same seed, epochs and global batch; bench/accuracy_bench.py

The default graph is the other benchmarks' 1M-node community graph (20M directed edges,
128-wide features; the partition figure runs on partition_bench.py's graph, the same
generator with its default 32-wide features); --quick uses 100k nodes and fewer repeats (a few minutes). Progress goes to stderr.
--smoke runs every figure end to end on a 3,000-node graph (one repeat, batches of 100, training
on 1 and 2 hosts, the launch on 1, one parity epoch with 1 trainer per host), into a temporary folder unless --out is given: it checks
that the benchmarks run, its numbers mean nothing (tests/bench/test_figures_smoke.py runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import REPO, prepare_parts
from bench.figures_report import figure_rows, markdown, split_rows

FIGURES = ("partition", "sampling", "training", "launch", "parity")
_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[figures {time.perf_counter() - _T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def settings(mode: str = "full") -> dict[str, Any]:
    """Sizes and repeats of a run; --quick scales everything down, nothing else changes.
    --smoke goes further (a graph this small needs smaller batches, fewer steps and one
    parity epoch; training on 1 and 2 hosts, as 3 add no code path; the launch on 1 host and
    parity with 1 trainer per host, as more processes add none either): only that every
    figure runs end to end."""
    if mode == "smoke":
        return {
            "nodes": 3_000, "avg_degree": 20.0, "feat_dim": 128, "partition_feat_dim": 32,
            "partition_parts": 4, "partition_repeat": 1, "runtime_repeat": 1,
            "global_steps": 6, "batch_size": 100, "hosts": [1, 2], "launch_repeat": 1,
            "parity_epochs": 1, "launch_hosts": 1, "parity_trainers": 1,
        }
    quick = mode == "quick"
    return {
        "nodes": 100_000 if quick else 1_000_000, "avg_degree": 20.0, "feat_dim": 128,
        "partition_feat_dim": 32, "partition_parts": 4,
        "partition_repeat": 1 if quick else 3, "runtime_repeat": 3 if quick else 5,
        "global_steps": 30 if quick else 120, "batch_size": 1000, "hosts": [1, 2, 3],
        "launch_repeat": 1 if quick else 3, "parity_epochs": 2, "launch_hosts": 2,
        "parity_trainers": 2,
    }


def prepare(work: Path, s: dict[str, Any]) -> dict[str, Path]:
    """Generate the graph once; write the partition figure's npz and the partitions the other
    figures run on: 1 and 2 parts (sampling, launch, parity) and one per training host count."""
    from partitioner.generate import generate_graph
    from partitioner.readers import write_npz

    # The partition figure's input is partition_bench.py's graph (generate_graph's default
    # 32-wide features): the generator's random stream depends on the feature width, and the
    # METIS time depends on the instance (4.4 s on the 128-wide one, 7.6 s on this).
    log(f"graph: generating {s['nodes']:,} nodes, average degree {s['avg_degree']:.0f} "
        "(partition figure: the partition benchmark's graph)")
    npz = work / "bench.npz"
    write_npz(generate_graph(s["nodes"], avg_degree=s["avg_degree"], seed=0), npz)
    log(f"graph: generating {s['nodes']:,} nodes, average degree {s['avg_degree']:.0f}, "
        f"{s['feat_dim']}-wide features (the other figures)")
    graph = generate_graph(s["nodes"], avg_degree=s["avg_degree"], feat_dim=s["feat_dim"], seed=0)
    s["edges"] = graph.total_edges
    s["train_nodes"] = int(graph.ndata["_N"]["train_mask"].sum())
    counts = sorted({1, 2, *s["hosts"]})
    log(f"graph: {graph.total_edges:,} directed edges; partitioning into "
        f"{', '.join(map(str, counts[:-1]))} and {counts[-1]} parts")
    parts = prepare_parts(graph, work, tuple(counts))
    return {"npz": npz, **{f"p{k}": v for k, v in parts.items()}}


def fig_partition(work: Path, s: dict, inp: dict) -> dict:
    from bench.partition_bench import measure_partition

    return measure_partition(inp["npz"], work, parts=s["partition_parts"],
                             repeat=s["partition_repeat"], log=log)


def fig_sampling(work: Path, s: dict, inp: dict) -> dict:
    from bench.runtime_bench import measure_sampling_and_pull

    log("sampling + pull: local sampling, servers on 127.0.0.1/.2, pulls, bare pyzmq")
    return measure_sampling_and_pull(inp["p1"], inp["p2"], work, s["nodes"],
                                     s["runtime_repeat"])


def fig_training(work: Path, s: dict, inp: dict) -> dict:
    from bench.epoch_bench import run_epoch

    out = {}
    for hosts in s["hosts"]:
        steps = s["global_steps"] // hosts
        if steps * hosts != s["global_steps"]:
            raise ValueError(f"{s['global_steps']} global steps do not split over {hosts} hosts")
        if steps * s["batch_size"] > s["train_nodes"] // hosts:
            raise ValueError(f"{steps} steps of {s['batch_size']} exceed a trainer's share of "
                             f"{s['train_nodes']:,} training nodes")
        log(f"training: {hosts} host(s), {steps} steps per trainer, batch {s['batch_size']}")
        out[str(hosts)] = run_epoch(inp[f"p{hosts}"], work, hosts=hosts,
                                    steps_per_trainer=steps, batch_size=s["batch_size"])
    return out


def fig_launch(work: Path, s: dict, inp: dict) -> dict:
    from bench.jobs import local_cluster_file, ssh_cluster_file
    from bench.launch_bench import measure_launch

    out: dict[str, Any] = {}
    hosts = s["launch_hosts"]
    part = inp[f"p{hosts}"]
    cluster = local_cluster_file(work / "launch-local.yaml", hosts=hosts)
    out["local"] = measure_launch(cluster, part, work, hosts=hosts, repeat=s["launch_repeat"],
                                  log=log)
    why = _ssh_unavailable()
    if why:
        log(f"launch over ssh: skipped ({why})")
        out["ssh"] = {"status": "skipped", "why": why}
        return out
    from testing.sshd import start_sshd

    log("launch over ssh: starting a test sshd on 127.0.0.1-3")
    shutil.rmtree(work / "sshd", ignore_errors=True)  # a kept --workdir holds the last keys
    sshd = None
    try:
        sshd = start_sshd(work / "sshd")
        cluster = ssh_cluster_file(work / "launch-ssh.yaml", sshd, hosts=hosts)
        # The direct baseline is the same processes as for the local transport: not rerun.
        out["ssh"] = measure_launch(cluster, part, work, hosts=hosts, repeat=s["launch_repeat"],
                                    baseline=False, log=log)
    except Exception as e:  # noqa: BLE001 - the optional part fails alone, with its reason
        out["ssh"] = {"status": "failed", "why": f"{type(e).__name__}: {e}"}
        log(f"launch over ssh: FAILED ({type(e).__name__}: {e})")
    finally:
        if sshd is not None:
            sshd.stop()
    if out["ssh"].get("status") is None:
        local = out["local"]
        out["ssh"].update(direct_s=local["direct_s"], sigterm_s=local["sigterm_s"],
                          launch_ratio=out["ssh"]["launch_s"] / local["direct_s"],
                          stop_ratio=out["ssh"]["stop_s"] / local["sigterm_s"])
    return out


def _ssh_unavailable() -> str | None:
    from testing.sshd import SSHD

    if os.geteuid() != 0:
        return "needs root to start the test sshd"
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        return f"{SSHD} or ssh-keygen not installed (openssh-server)"
    return None


def fig_parity(work: Path, s: dict, inp: dict) -> dict:
    from bench.accuracy_bench import measure_parity

    log(f"parity: single process vs 2 parts x {s['parity_trainers']} trainer(s), "
        f"{s['parity_epochs']} epochs each")
    return measure_parity(inp["p1"], inp["p2"], work, epochs=s["parity_epochs"],
                          batch_size=s["batch_size"], trainers_per_host=s["parity_trainers"])


RUNNERS: dict[str, Callable[[Path, dict, dict], dict]] = {
    "partition": fig_partition, "sampling": fig_sampling, "training": fig_training,
    "launch": fig_launch, "parity": fig_parity}


def machine() -> dict[str, Any]:
    import numpy
    import torch

    mem = next((int(ln.split()[1]) * 1024 for ln in open("/proc/meminfo")
                if ln.startswith("MemTotal")), None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return {"cpus": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version(),
            "torch": torch.__version__, "numpy": numpy.__version__,
            "platform": platform.platform(), "commit": commit + ("+changes" if dirty else ""),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="100k-node graph and fewer repeats: a few minutes")
    size.add_argument("--smoke", action="store_true",
                      help="3k-node graph, one repeat: does every figure run? (meaningless "
                           "numbers; output in a temporary folder unless --out is given)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where figures.json, figures.md and the PNGs go [bench-out/figures/; "
                         "--smoke: a new temporary folder]")
    ap.add_argument("--only", default=",".join(FIGURES),
                    help=f"comma-separated subset of {', '.join(FIGURES)}")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="graph, partitions and workspaces (default: a temporary folder, "
                         "removed at the end)")
    args = ap.parse_args(argv)
    only = [f.strip() for f in args.only.split(",") if f.strip()]
    unknown = sorted(set(only) - set(FIGURES))
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    s = settings(mode)
    if args.out is None:
        args.out = (Path(tempfile.mkdtemp(prefix="dglctl-figures-smoke-out-")) if args.smoke
                    else Path("bench-out/figures"))
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-figures-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"{mode} run; work folder {work}; output {args.out}")
    results: dict[str, Any] = {"mode": mode, "quick": args.quick, "settings": s,
                               "machine": machine(), "figures": {}, "seconds": {}}
    try:
        t0 = time.perf_counter()
        inputs = prepare(work, s)
        results["seconds"]["prepare"] = time.perf_counter() - t0
        for name in FIGURES:
            if name not in only:
                results["figures"][name] = {"status": "skipped", "why": "not in --only"}
                continue
            t0 = time.perf_counter()
            try:
                results["figures"][name] = {"status": "measured",
                                            **RUNNERS[name](work, s, inputs)}
            except Exception as e:  # noqa: BLE001 - one failed figure must not hide the others
                log(f"{name}: FAILED\n{traceback.format_exc()}")
                results["figures"][name] = {"status": "failed", "why": f"{type(e).__name__}: {e}"}
            results["seconds"][name] = time.perf_counter() - t0
            log(f"{name}: done in {results['seconds'][name]:.0f}s")
            _print_figure(name, results)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    results["seconds"]["total"] = time.perf_counter() - _T0
    (args.out / "figures.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (args.out / "figures.md").write_text(markdown(results))
    pngs = _plots(results, args.out)
    print(f"\nwrote {args.out / 'figures.json'}, {args.out / 'figures.md'}"
          + (f", {', '.join(str(p) for p in pngs)}" if pngs else "")
          + f"; the whole run took {results['seconds']['total']:.0f}s")
    failed = [n for n, f in results["figures"].items() if f.get("status") == "failed"]
    if failed:
        print(f"FAILED figures: {', '.join(failed)} (see figures.json and the log above)")
    return 1 if failed else 0


def _print_figure(name: str, results: dict[str, Any]) -> None:
    """The figure's rows on stdout: value, same-run baseline, ratio."""
    rows = figure_rows(name, results["figures"][name], results["settings"])
    print(f"\n== {name}", flush=True)
    for label, value, base, ratio, note in rows:
        text = f"  {label}: {value}"
        if base:
            text += f" | baseline: {base}"
        if ratio:
            text += f" | ratio {ratio}"
        if note:
            text += f"  ({note})"
        print(text)
    if name == "training" and results["figures"][name].get("status") == "measured":
        for line in split_rows(results["figures"][name], header=True, md=False):
            print("  " + line)
    sys.stdout.flush()


def _plots(results: dict[str, Any], out: Path) -> list[Path]:
    try:
        from bench.figures_plot import plot_all
    except ImportError as e:
        log(f"plots: skipped ({e}); install the bench extra: pip install -e '.[bench]'")
        return []
    return plot_all(results, out)


if __name__ == "__main__":
    sys.exit(main())
