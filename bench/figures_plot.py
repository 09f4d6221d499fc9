"""PNG plots of a bench/figures.py run (matplotlib, the optional ``bench`` extra): one file per
figure, each bar next to its same-run baseline. Figures that were not measured get no plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.figures_report import SPLIT, run_mode  # noqa: E402

BASE, OURS = "#9e9e9e", "#1f77b4"
COLORS = {"sample": "#1f77b4", "fetch": "#ff7f0e", "forward": "#2ca02c",
          "backward": "#d62728", "allreduce": "#9467bd", "other": "#c7c7c7"}


def _measured(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    f = results["figures"].get(name, {})
    return f if f.get("status") == "measured" else None


def _bars(ax, labels: list[str], values: list[float], colors: list[str], fmt: str) -> None:
    bars = ax.bar(labels, values, color=colors)
    for b, v in zip(bars, values, strict=True):
        ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.margins(y=0.15)


def _title(results: dict[str, Any]) -> str:
    s = results["settings"]
    mode = run_mode(results)
    return f"{s['nodes']:,} nodes{'' if mode == 'full' else f' (--{mode})'}"


def plot_training(f: dict, results: dict, path: Path) -> None:
    runs = sorted((int(k), v) for k, v in f.items() if k.isdigit())
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{h} host{'s' if h > 1 else ''}" for h, _ in runs]
    bottom = [0.0] * len(runs)
    for key in (*SPLIT, "other"):
        vals = [(r["epoch_s"] - sum(r["split"].get(k, 0.0) for k in SPLIT)) if key == "other"
                else r["split"].get(key, 0.0) for _, r in runs]
        vals = [max(0.0, v) for v in vals]
        ax.bar(labels, vals, bottom=bottom, color=COLORS[key], label=key)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    for i, (_, r) in enumerate(runs):
        ax.annotate(f"{r['epoch_s']:.2f} s\n{r['seeds_s']:,.0f} seeds/s", (i, bottom[i]),
                    ha="center", va="bottom", fontsize=8)
    ax.margins(y=0.2)
    ax.set_ylabel("seconds (rank 0)")
    seeds = runs[0][1]["seeds"] if runs else 0
    ax.set_title(f"Epoch time split, same {seeds:,} seeds in all — {_title(results)}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_throughput(f: dict, results: dict, path: Path) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(13, 4))
    panels = [
        ("sampling, seeds/s", ["local", "servers"], [f["local_seeds_s"], f["dist_seeds_s"]],
         "{:,.0f}"),
        ("sampling, M edges/s", ["local", "servers"],
         [f["local_edges_s"] / 1e6, f["dist_edges_s"] / 1e6], "{:.2f}"),
        ("remote pull, GB/s", ["bare pyzmq", "dglctl"], [f["bare_zmq_gbs"], f["pull_remote_gbs"]],
         "{:.2f}"),
        ("local rows, GB/s", ["numpy", "dglctl"], [f["numpy_local_gbs"], f["pull_local_gbs"]],
         "{:.2f}"),
    ]
    for ax, (title, labels, vals, fmt) in zip(axes, panels, strict=True):
        _bars(ax, labels, vals, [BASE, OURS], fmt)
        ax.set_title(f"{title}\nratio {vals[1] / vals[0]:.2f}", fontsize=10)
    fig.suptitle(f"Sampling and feature pull vs same-run baselines — {_title(results)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_partition(f: dict, results: dict, path: Path) -> None:
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(12, 4.5),
                                       gridspec_kw={"width_ratios": [3, 2, 2]})
    ax.bar(["METIS alone"], [f["metis_alone_s"]], color=BASE)
    bottom = 0.0
    cmap = plt.get_cmap("tab10")
    phases = dict(f["phases"])
    phases["start-up, rest"] = max(0.0, f["whole_s"] - sum(phases.values()))
    for i, (k, v) in enumerate(phases.items()):
        ax.bar(["whole dglctl partition"], [v], bottom=bottom, color=cmap(i), label=k)
        bottom += v
    ax.annotate(f"{f['whole_s']:.2f} s (ratio {f['ratio']:.2f})", (1, bottom), ha="center",
                va="bottom", fontsize=8)
    ax.annotate(f"{f['metis_alone_s']:.2f} s", (0, f["metis_alone_s"]), ha="center",
                va="bottom", fontsize=8)
    ax.margins(y=0.15)
    ax.set_ylabel("seconds")
    ax.set_title("phases vs the METIS call alone", fontsize=10)
    ax.legend(fontsize=8)
    _bars(ax2, ["METIS alone\n+ its input", "whole run"],
          [f["metis_alone_peak_bytes"] / 1e9, f["peak_bytes"] / 1e9], [BASE, OURS], "{:.2f}")
    ax2.set_title("peak memory, GB", fontsize=10)
    _bars(ax3, ["random", "dglctl"], [f["random_cut_pct"], f["edge_cut_pct"]], [BASE, OURS],
          "{:.2f} %")
    ax3.set_title("edge cut, % of edges", fontsize=10)
    fig.suptitle(f"Partition, {f['parts']} parts — {_title(results)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_launch(f: dict, results: dict, path: Path) -> None:
    measured = [(how, r) for how in ("local", "ssh")
                if (r := f.get(how)) and r.get("status") is None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = ["direct"] + [f"dglctl ({how})" for how, _ in measured]
    vals = [measured[0][1]["direct_s"]] + [r["launch_s"] for _, r in measured]
    _bars(axes[0], labels, vals, [BASE] + [OURS] * len(measured), "{:.1f} s")
    axes[0].set_title("start to first training step (s)", fontsize=10)
    labels = ["plain SIGTERM"] + [f"dglctl stop ({how})" for how, _ in measured]
    vals = [measured[0][1]["sigterm_s"]] + [r["stop_s"] for _, r in measured]
    _bars(axes[1], labels, vals, [BASE] + [OURS] * len(measured), "{:.2f} s")
    axes[1].set_title("stop until nothing runs (s)", fontsize=10)
    fig.suptitle(f"Launch and stop, 2 hosts — {_title(results)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_all(results: dict[str, Any], out: Path) -> list[Path]:
    """Write one PNG per measured figure into ``out``; return their paths."""
    written = []
    for name, fn, fname in (("training", plot_training, "epoch_split.png"),
                            ("sampling", plot_throughput, "sampling_pull.png"),
                            ("partition", plot_partition, "partition.png"),
                            ("launch", plot_launch, "launch.png")):
        f = _measured(results, name)
        if f is None:
            continue
        if name == "launch" and (f.get("local") or {}).get("status") is not None:
            continue
        fn(f, results, out / fname)
        written.append(out / fname)
    return written
