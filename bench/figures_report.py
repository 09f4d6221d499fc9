"""The figures of bench/figures.py as rows (figure, value, same-run baseline, ratio, note): the
lines it prints and the markdown table for docs/benchmarks.md. Only formats what was measured: a figure
that was skipped or failed is shown as such, with its reason."""

from __future__ import annotations

from typing import Any

Row = tuple[str, str, str, str, str]
SPLIT = ("sample", "fetch", "forward", "backward", "allreduce")


def _s(x: float) -> str:
    return f"{x:.2f} s" if x < 100 else f"{x:.0f} s"


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f} GB"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def run_mode(results: dict[str, Any]) -> str:
    """The size the run was made at: "full", "quick" or "smoke" (runs written before --smoke
    only say whether they were quick)."""
    return results.get("mode") or ("quick" if results.get("quick") else "full")


def figure_rows(name: str, f: dict[str, Any], s: dict[str, Any]) -> list[Row]:
    """Rows of one figure; ratio = value / baseline."""
    status = f.get("status")
    if status != "measured":
        return [(name, status.upper() if status == "failed" else status, "", "",
                 f.get("why", ""))]
    return {"partition": _partition, "sampling": _sampling, "training": _training,
            "launch": _launch, "parity": _parity}[name](f, s)


def _partition(f: dict, s: dict) -> list[Row]:
    m = f["method"].upper() if f["method"] == "metis" else f["method"]
    phases = ", ".join(f"{k} {v:.2f}" for k, v in f["phases"].items())
    runs = f"median of {f['repeat']}" if f["repeat"] > 1 else "1 run"
    return [
        (f"partition, whole `dglctl partition` ({f['parts']} parts, {len(f['constraints'])} "
         f"constraints)", _s(f["whole_s"]), f"{m} call alone {_s(f['metis_alone_s'])}",
         _ratio(f["whole_s"], f["metis_alone_s"]), f"{runs}; lower is better"),
        ("partition phases (s, inside the whole run)", phases,
         f"{m} call alone {_s(f['metis_alone_s'])}",
         _ratio(f["phases"].get("assign", 0.0), f["metis_alone_s"]),
         f"ratio: {m} inside the run / alone"),
        ("partition peak memory (whole run)", _gb(f["peak_bytes"]),
         f"{m} alone with its input {_gb(f['metis_alone_peak_bytes'])}",
         _ratio(f["peak_bytes"], f["metis_alone_peak_bytes"]), "each in its own process"),
        ("partition edge cut", f"{f['edge_cut_pct']:.2f} % ({_n(f['edge_cut'])} edges)",
         f"random assignment {f['random_cut_pct']:.2f} %",
         _ratio(f["edge_cut_pct"], f["random_cut_pct"]),
         "balance max/mean " + ", ".join(f"{k} {v}" for k, v in f["balance"].items()
                                         if k in ("nodes", "train_nodes", "edges"))),
    ]


def _sampling(f: dict, s: dict) -> list[Row]:
    return [
        ("sampling [10, 25], 1000 seeds, through the servers (seeds/s)",
         _n(f["dist_seeds_s"]), f"local in-process {_n(f['local_seeds_s'])}",
         _ratio(f["dist_seeds_s"], f["local_seeds_s"]), "higher is better"),
        ("sampling, edges/s", f"{f['dist_edges_s'] / 1e6:.2f}M",
         f"local in-process {f['local_edges_s'] / 1e6:.2f}M",
         _ratio(f["dist_edges_s"], f["local_edges_s"]), "higher is better"),
        (f"remote feature pull, 10k rows x {f['feat_dim']} float32 (GB/s)",
         f"{f['pull_remote_gbs']:.2f}", f"bare pyzmq round trip {f['bare_zmq_gbs']:.2f}",
         _ratio(f["pull_remote_gbs"], f["bare_zmq_gbs"]), "higher is better"),
        ("local rows from shared memory (GB/s)", f"{f['pull_local_gbs']:.2f}",
         f"numpy fancy indexing {f['numpy_local_gbs']:.2f}",
         _ratio(f["pull_local_gbs"], f["numpy_local_gbs"]), "higher is better"),
    ]


def _training(f: dict, s: dict) -> list[Row]:
    runs = {k: v for k, v in f.items() if k.isdigit()}
    base = runs.get("1")
    rows = []
    for k, r in sorted(runs.items(), key=lambda kv: int(kv[0])):
        label = (f"epoch, {k} host{'s' if k != '1' else ''} x (1 server + 1 trainer), "
                 f"{r['steps_per_trainer']} steps of {r['batch_size']} per trainer")
        value = f"{_s(r['epoch_s'])} ({_n(r['seeds_s'])} seeds/s)"
        if k == "1":
            rows.append((label, value, "(the baseline)", "1.00",
                         f"{_n(r['seeds'])} seeds in all; lower is better"))
        else:
            rows.append((label, value, f"1 host {_s(base['epoch_s'])}",
                         _ratio(r["epoch_s"], base["epoch_s"]),
                         f"same {_n(r['seeds'])} seeds; lower is better"))
    return rows


def split_rows(f: dict, *, header: bool, md: bool) -> list[str]:
    """Where the epoch time goes: one line per host count (rank 0's timers)."""
    runs = sorted(((int(k), v) for k, v in f.items() if k.isdigit()))
    cols = ["hosts", "epoch", *SPLIT, "other"]
    lines = []
    if md:
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    elif header:
        lines.append("  ".join(f"{c:>9}" for c in cols))
    for hosts, r in runs:
        parts = [r["split"].get(k, 0.0) for k in SPLIT]
        vals = [str(hosts), f"{r['epoch_s']:.2f}", *(f"{v:.2f}" for v in parts),
                f"{r['epoch_s'] - sum(parts):.2f}"]
        lines.append("| " + " | ".join(vals) + " |" if md
                     else "  ".join(f"{v:>9}" for v in vals))
    return lines


def _launch(f: dict, s: dict) -> list[Row]:
    rows = []
    for how in ("local", "ssh"):
        r = f.get(how)
        if r is None:
            continue
        if r.get("status") in ("skipped", "failed"):
            rows.append((f"launch over {how}", r["status"].upper() if r["status"] == "failed"
                         else "skipped", "", "", r["why"]))
            continue
        runs = f"median of {len(r['launch_runs'])}" if len(r["launch_runs"]) > 1 else "1 run"
        steps = ", ".join(f"{k} {v:.1f}" for k, v in r.get("launcher_steps", {}).items())
        rows.append((f"`dglctl launch` to first training step ({how}, {r['hosts']} hosts, "
                     "shards in place)", _s(r["launch_s"]),
                     f"started directly with python {_s(r['direct_s'])}",
                     _ratio(r["launch_s"], r["direct_s"]),
                     f"{runs}; launcher steps (s): {steps}; first launch, copying the "
                     f"shards: {_s(r['first_launch_s'])}"))
        state = ("nothing left (processes, /dev/shm)" if r["clean"] else
                 f"NOT CLEAN: exit {r['stop_exit_code']}, left {', '.join(r['left'])}")
        rows.append((f"`dglctl stop` until nothing runs ({how}, {r['processes']} processes)",
                     _s(r["stop_s"]), f"plain SIGTERM {_s(r['sigterm_s'])}",
                     _ratio(r["stop_s"], r["sigterm_s"]), state))
    return rows


def _parity(f: dict, s: dict) -> list[Row]:
    ok = "within 1 point" if f["within_1_point"] else "NOT within 1 point"
    return [(f"test accuracy, 2 parts x {f['trainers'] // 2} trainers launched ({f['epochs']} epochs, global batch "
             f"{f['global_batch']})", f"{100 * f['dist_acc']:.2f} %",
             f"single process, standalone DistGraph {100 * f['single_acc']:.2f} %",
             f"{f['diff_points']:+.2f} points", ok)]


def markdown(results: dict[str, Any]) -> str:
    """The table for docs/benchmarks.md of a run, with what the run was."""
    s, m = results["settings"], results["machine"]
    flag = "" if run_mode(results) == "full" else f" --{run_mode(results)}"
    lines = [
        f"Run: `python -m bench.figures{flag}` on "
        f"{m['date']}, commit {m['commit']}, {m['cpus']} CPUs, "
        f"{(m['memory_bytes'] or 0) / 2**30:.0f} GiB, Python {m['python']}, torch {m['torch']}; "
        f"graph {s['nodes']:,} nodes, {s.get('edges', 0):,} directed edges, "
        f"{s['feat_dim']}-wide features ({s['partition_feat_dim']} for the partition figure); "
        f"whole run {results['seconds'].get('total', 0):.0f} s. Ratio = dglctl / baseline, "
        "both measured in this run.",
        "",
        "| figure | dglctl | baseline (same run) | ratio | note |",
        "|---|---|---|---|---|",
    ]
    for name, f in results["figures"].items():
        for row in figure_rows(name, f, s):
            lines.append("| " + " | ".join(c.replace("|", "/") for c in row) + " |")
    training = results["figures"].get("training", {})
    if training.get("status") == "measured":
        lines += ["", "Where the epoch time goes (seconds, rank 0; `allreduce` includes the "
                  "wait for the slowest trainer; `other` is the loop's own time outside the "
                  "timers):", ""]
        lines += split_rows(training, header=True, md=True)
    return "\n".join(lines) + "\n"
