"""Partition scaling: the peak memory of the whole `dglctl partition`, per phase and per
directed edge, at several graph sizes, against what holding the input takes.

For papers100M-scale partitioning (1.6G directed edges, 3.2G symmetric entries): the goal is
<= 80 bytes per directed edge at the largest size, flat or falling as the graph grows (about 167
before the work on it; docs/benchmarks.md has the figures since). A single size hides where the
bytes go and whether they grow faster than the edges, so for each size E (directed edges; 10M,
50M by default), and each --methods x --regimes (the fast regime first: the baseline), this
  1. generates a community graph of E/20 nodes, average degree 20, D-wide float32 features
     with `dglctl generate` (a child process; kept in the cache folder and reused when a
     graph of the same parameters is there),
  2. asks `dglctl partition --estimate --json` for the plan's estimate of each phase, then
     runs the whole `dglctl partition --input X.npz --num-parts P --out DIR --regime R
     --method M` (defaults otherwise) as a child process and reads its /proc/PID/status every 10 ms (VmRSS,
     VmHWM). Each reading goes to the phase the child is in, known from its progress lines
     on stderr, read as they come: "[2/5] symmetrize: ... ..." starts a phase and
     "      symmetrize done in 1.49s" ends it (the CLI's own format off a terminal; there is no
     machine-readable progress mode, and --json silences the progress). What lies outside
     the phases is counted too: "start-up" (interpreter, imports, output check), "after X"
     between phases (e.g. the balance weights after symmetrize), "after write" (quality
     report, config, rename, exit),
  3. measures two baselines in the same run: the bytes of the input as the npz holds them
     (edge arrays, features and the other node data, uncompressed), and the peak RSS of a
     fresh child that only reads the graph (`partitioner.readers.read_graph`; uncompressed npz
     members are memory-mapped, so that is what reading touches),
and prints per phase its seconds, peak RSS, peak bytes per directed edge, the ratio to the
read-only child's peak and the plan's estimate; for the whole run VmHWM per directed edge
against both baselines; then one row per size, method and regime, with peak / estimate and the
lean regime's peak and time against the fast one's, to see how the bytes per edge move with
size.

A phase's peak is the largest VmRSS read in it, or the VmHWM where the high-water mark rose
since the reading before (so a spike between two readings still counts, for the phase of the
reading after it). A progress line reaches this process a little after the child prints it
(under a millisecond when a core is free); the reading taken as it arrives closes the phase
before, so the first moment of a phase can be counted to the one before.

    python -m bench.partition_scaling [--edges 10M,50M] [--feat-dim 128] [--parts 4]
                                      [--regimes fast,lean] [--methods metis,kaminpar]
                                      [--plot PNG] [--json] [--out DIR] [--smoke]

--smoke: one size of 60k edges, 16-wide features, in a temporary folder unless --out is
given: checks that the benchmark runs (tests/bench/test_partition_scaling_smoke.py); its
numbers mean little at that size (the interpreter's own ~40 MB dominate).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO, report_sizes, run_child

# The phases `dglctl partition` reports with its default method (metis), in order.
PHASES = ("read", "symmetrize", "assign", "relabel", "write")
START_UP = "start-up"
GOAL_BYTES_PER_EDGE = 80  # the goal for the whole run
TODAY_BYTES_PER_EDGE = 167  # what the issue measured before (10M-20M edges)
SMOKE_EDGES = "60k"
SMOKE_FEAT_DIM = 16
INTERVAL = 0.01  # seconds between two readings of /proc/PID/status

# PhaseProgress's lines off a terminal (dglctl/display.py): "[i/N] name: detail ..." when a
# phase starts, "      name done in 1.23s (12.3M edges/s)" when it ends.
_START = re.compile(r"^\[(\d+)/(\d+)\] ([A-Za-z0-9_-]+)(?::.*)? \.\.\.$")
_END = re.compile(r"^\s+([A-Za-z0-9_-]+) done in ([0-9.]+)s(?: \(.*\))?$")
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def log(msg: str) -> None:
    """A progress line on stderr (stdout holds the tables, or the JSON alone)."""
    print(f"[partition_scaling] {msg}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    """A count of directed edges: ``60000``, ``60k``, ``10M``, ``1.5G`` (powers of 1000)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 60k, 10M, 1.5G)")
    return round(float(m.group(1)) * _SUFFIX[m.group(2).lower()])


@dataclass
class Segment:
    """One stretch of the child's run: a phase it reported, or the time outside them."""

    name: str
    kind: str  # "phase" or "gap"
    start: float  # seconds since the child was started, as seen here
    end: float | None = None
    peak_rss: int = 0
    peak_anon: int = 0
    readings: int = 0
    reported_seconds: float | None = None  # the child's own "done in" figure

    def figures(self, edges: int, read_only_peak: int) -> dict[str, Any]:
        """Seconds, peak RSS, bytes per directed edge and ratio to the read-only peak."""
        seconds = (self.end if self.end is not None else self.start) - self.start
        peak = self.peak_rss or None
        return {"kind": self.kind, "seconds": seconds, "reported_seconds": self.reported_seconds,
                "peak_rss_bytes": peak, "peak_rss_anon_bytes": self.peak_anon or None,
                "bytes_per_edge": peak / edges if peak else None,
                "ratio_to_read_only": peak / read_only_peak if peak and read_only_peak
                else None,
                "readings": self.readings}


class PhaseTracker:
    """Attributes the child's /proc readings to the phase its stderr says it is in.

    Fed by :func:`bench.common.run_child` (``on_sample`` and ``on_stderr_line``) under its
    ``lock``: the readings arrive in the order they were taken, one at a time.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.t0 = time.perf_counter()
        self.segments: list[Segment] = [Segment(START_UP, "gap", 0.0)]
        self.prev_hwm = 0
        self.total: int | None = None  # N of "[i/N]"

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def sample(self, status: dict[str, int]) -> None:
        """A reading of /proc/PID/status: it belongs to the current segment."""
        if "VmRSS" not in status:
            return  # exiting: its memory is gone
        seg = self.segments[-1]
        seg.readings += 1
        seg.peak_rss = max(seg.peak_rss, status["VmRSS"])
        seg.peak_anon = max(seg.peak_anon, status.get("RssAnon", 0))
        hwm = status.get("VmHWM", 0)
        if hwm > self.prev_hwm:  # the high-water mark rose since the reading before
            seg.peak_rss = max(seg.peak_rss, hwm)
            self.prev_hwm = hwm

    def line(self, text: str, status: dict[str, int]) -> None:
        """A line of the child's stderr with the reading taken as it arrived: the reading
        belongs to the current segment; a phase start or end then closes it and opens the
        next one."""
        self.sample(status)
        start, end = _START.match(text), _END.match(text)
        if not start and not end:
            return
        now = self._now()
        self.segments[-1].end = now
        if start:
            self.total = int(start.group(2))
            self.segments.append(Segment(start.group(3), "phase", now))
        else:
            assert end is not None
            name = end.group(1)
            current = self.segments[-1]
            if current.kind == "phase" and current.name == name:
                current.reported_seconds = float(end.group(2))
            self.segments.append(Segment(f"after {name}", "gap", now))

    def finish(self, wall: float) -> None:
        """The child has exited after ``wall`` seconds (as run_child measured it)."""
        self.segments[-1].end = max(wall, self.segments[-1].start)


def npz_arrays(path: Path) -> dict[str, dict[str, Any]]:
    """Each array of an npz as the file holds it (from the .npy headers, no data read):
    name -> shape, dtype, bytes uncompressed."""
    import numpy as np

    out = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            with zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            out[info.filename.removesuffix(".npy")] = {
                "shape": list(shape), "dtype": str(dtype),
                "bytes": math.prod(shape) * dtype.itemsize}
    return out


def input_figures(path: Path) -> dict[str, Any]:
    """The graph's size and the bytes of its arrays as the npz holds them, uncompressed:
    edges (src, dst or indptr, indices), features (node:feat), the rest of the node data."""
    import numpy as np

    arrays = npz_arrays(path)
    edge_keys = [k for k in ("src", "dst", "indptr", "indices") if k in arrays]
    edges = (arrays["src"]["shape"][0] if "src" in arrays
             else arrays["indices"]["shape"][0])
    with np.load(path) as archive:
        nodes = int(archive["num_nodes"]) if "num_nodes" in arrays else None
    by_kind = {"edges": sum(arrays[k]["bytes"] for k in edge_keys),
               "features": sum(a["bytes"] for k, a in arrays.items() if k == "node:feat"),
               "other": sum(a["bytes"] for k, a in arrays.items()
                            if k not in edge_keys and k != "node:feat")}
    return {"nodes": nodes, "edges": edges, "arrays": arrays, "input_bytes": by_kind,
            "input_bytes_total": sum(by_kind.values()), "file_bytes": path.stat().st_size}


def cached_graph(cache: Path, edges: int, avg_degree: float,
                 feat_dim: int) -> tuple[Path, float | None]:
    """The npz of ``edges`` directed edges (``edges / avg_degree`` nodes), generated by
    ``dglctl generate`` in a child process unless ``cache`` already holds it. Returns the
    path and the seconds generation took (None when reused)."""
    nodes = round(edges / avg_degree)
    path = cache / f"graph-n{nodes}-d{avg_degree:g}-f{feat_dim}-s0.npz"
    if path.exists():  # dglctl generate writes atomically: an existing file is whole
        log(f"reusing {path}")
        return path, None
    cache.mkdir(parents=True, exist_ok=True)
    log(f"generating {nodes:,} nodes, average degree {avg_degree:g}, {feat_dim}-wide "
        f"features -> {path}")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dglctl", "generate", "--nodes", str(nodes), "--avg-degree",
         f"{avg_degree:g}", "--feat-dim", str(feat_dim), "--out", str(path)],
        cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dglctl generate exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-2000:]}")
    return path, time.perf_counter() - t0


def read_only_peak(npz: Path) -> dict[str, Any]:
    """Peak RSS and wall time of a fresh child that only reads the graph (``read_graph``)."""
    code, _, stderr, wall, peak = run_child(
        [sys.executable, "-c", "import sys; from partitioner.readers import read_graph; "
         "read_graph(sys.argv[1])", str(npz)], cwd=REPO, interval=INTERVAL)
    if code != 0:
        raise RuntimeError(f"read_graph alone exited {code}: {stderr.strip()[-2000:]}")
    return {"peak_bytes": peak, "seconds": wall}


def estimate(npz: Path, parts: int, regime: str, method: str) -> dict[str, Any]:
    """``dglctl partition --estimate --json``: the plan's estimated peak per phase."""
    proc = subprocess.run(
        [sys.executable, "-m", "dglctl", "partition", "--input", str(npz), "--num-parts",
         str(parts), "--out", str(npz.parent / "unused"), "--regime", regime, "--method",
         method, "--estimate", "--json"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dglctl partition --estimate exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def measure_partition(npz: Path, out: Path, parts: int, regime: str,
                      method: str) -> dict[str, Any]:
    """The whole ``dglctl partition`` of ``npz`` into ``out`` (which must not exist), its
    /proc readings split by phase. Returns the wall time, VmHWM, the child's own phase
    seconds and peak (its config's quality report), and the segments in order."""
    tracker = PhaseTracker()
    cmd = [sys.executable, "-m", "dglctl", "partition", "--input", str(npz),
           "--num-parts", str(parts), "--out", str(out), "--regime", regime, "--method", method]
    code, stdout, stderr, wall, peak = run_child(
        cmd, cwd=REPO, on_sample=tracker.sample, on_stderr_line=tracker.line,
        interval=INTERVAL, lock=tracker.lock)
    if code != 0:
        raise RuntimeError(f"dglctl partition exited {code}: {stderr.strip()[-2000:]}")
    tracker.finish(wall)
    phases = [s.name for s in tracker.segments if s.kind == "phase"]
    if not phases or len(phases) != tracker.total:
        raise RuntimeError(
            f"saw {len(phases)} phase(s) {phases} of {tracker.total} in dglctl partition's "
            f"progress lines; has their format changed (dglctl/display.py PhaseProgress)?\n"
            f"{stderr.strip()[-2000:]}")
    config_path = next((Path(ln[len("wrote "):].strip()) for ln in stdout.splitlines()
                        if ln.startswith("wrote ")), None)
    quality: dict[str, Any] = {}
    if config_path is not None and config_path.exists():
        quality = json.loads(config_path.read_text()).get("quality", {})
    return {"command": cmd, "seconds": wall, "peak_bytes": peak,
            "reported_peak_bytes": quality.get("peak_memory_bytes"),
            "reported_phase_seconds": quality.get("phase_seconds"),
            "edge_cut_pct": quality.get("edge_cut_pct"),
            "segments": tracker.segments, "readings": sum(s.readings for s in tracker.segments)}


def measure_size(label: str, edges: int, *, cache: Path, feat_dim: int, parts: int,
                 avg_degree: float, regime: str, method: str) -> dict[str, Any]:
    """Everything for one size: the graph, both baselines, the whole run by phase."""
    npz, gen_s = cached_graph(cache, edges, avg_degree, feat_dim)
    inp = input_figures(npz)
    e = inp["edges"]
    log(f"{label}: read_graph alone (baseline), fresh process")
    base = read_only_peak(npz)
    out = Path(tempfile.mkdtemp(prefix="parts-", dir=cache)) / "parts"
    plan = estimate(npz, parts, regime, method)
    log(f"{label}: whole dglctl partition, {parts} parts, --regime {regime}, --method {method} "
        f"-> {out}")
    try:
        run = measure_partition(npz, out, parts, regime, method)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)  # the disk space: shards ~ the graph
    reported = run.pop("reported_phase_seconds") or {}
    segs = run.pop("segments")
    phases, gaps = {}, {}
    for seg in segs:
        f = seg.figures(e, base["peak_bytes"])
        if seg.kind == "phase" and seg.name in reported:
            f["reported_seconds"] = reported[seg.name]  # the config's, to the microsecond
        if seg.kind == "phase" and seg.name in plan["phases"]:
            f["estimated_bytes"] = plan["phases"][seg.name]
        (phases if seg.kind == "phase" else gaps)[seg.name] = f
    total_input = inp["input_bytes_total"]
    whole = {**run, "bytes_per_edge": run["peak_bytes"] / e,
             "ratio_to_read_only": run["peak_bytes"] / base["peak_bytes"],
             "ratio_to_input": run["peak_bytes"] / total_input}
    whole["estimated_bytes"] = plan["peak_bytes"]
    whole["estimated_seconds"] = plan["seconds"]
    return {"status": "measured", "size": label, "regime": regime, "method": method,
            "edges_asked": edges, "estimate": plan,
            "nodes": inp["nodes"],
            "edges": e, "feat_dim": feat_dim, "parts": parts, "npz": str(npz),
            "generate_seconds": gen_s, "order": [s.name for s in segs],
            "input": {**inp, "bytes_per_edge": total_input / e},
            "read_only": {**base, "bytes_per_edge": base["peak_bytes"] / e},
            "phases": phases, "gaps": gaps, "whole": whole}


def machine() -> dict[str, Any]:
    """What the run ran on (no torch import: this module stays light)."""
    import numpy

    mem = next((int(ln.split()[1]) * 1024 for ln in open("/proc/meminfo")
                if ln.startswith("MemTotal")), None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    return {"cpus": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version(),
            "numpy": numpy.__version__, "platform": platform.platform(), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def _gb(x: float | None) -> str:
    return f"{x / 1e9:.3f}" if x else "-"


def _bpe(x: float | None) -> str:
    return f"{x:.1f}" if x is not None else "-"


def _ratio(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


def size_lines(r: dict[str, Any]) -> list[str]:
    """One size's block: the phase table, then each whole-run figure with its baseline."""
    if r["status"] != "measured":
        return [f"\n== {r['size']} {r.get('method', '')} {r.get('regime', '')}: FAILED "
                f"({r['why']})"]
    lines = [f"\n== {r['size']}: {r['nodes']:,} nodes, {r['edges']:,} directed edges, "
             f"{r['feat_dim']}-wide float32 features, {r['parts']} parts, --regime "
             f"{r['regime']}, --method {r['method']}",
             f"  {'phase':<22}{'seconds':>9}{'peak GB':>10}{'bytes/edge':>12}"
             f"{'/ read-only':>13}{'estimate GB':>13}{'peak/est.':>11}"]
    for name in r["order"]:
        f = r["phases"].get(name) or r["gaps"][name]
        label = name if f["kind"] == "phase" else f"({name})"
        est = f.get("estimated_bytes")
        lines.append(f"  {label:<22}{f['seconds']:>9.3f}{_gb(f['peak_rss_bytes']):>10}"
                     f"{_bpe(f['bytes_per_edge']):>12}{_ratio(f['ratio_to_read_only']):>13}"
                     f"{_gb(est) if est else '':>13}"
                     f"{_ratio(f['peak_rss_bytes'] / est) if est else '':>11}")
    w, ro, inp = r["whole"], r["read_only"], r["input"]
    lines.append(f"  {'whole run (VmHWM)':<22}{w['seconds']:>9.3f}{_gb(w['peak_bytes']):>10}"
                 f"{_bpe(w['bytes_per_edge']):>12}{_ratio(w['ratio_to_read_only']):>13}"
                 f"{_gb(w['estimated_bytes']):>13}"
                 f"{_ratio(w['peak_bytes'] / w['estimated_bytes']):>11}")
    lines.append(f"  estimated time {w['estimated_seconds']:.1f} s (2-core reference), measured "
                 f"{w['seconds']:.1f} s")
    rows = [
        ("whole run peak (VmHWM)", f"{_bpe(w['bytes_per_edge'])} B/edge",
         f"read_graph alone, fresh process {_bpe(ro['bytes_per_edge'])} B/edge "
         f"({_gb(ro['peak_bytes'])} GB)", w["ratio_to_read_only"],
         f"goal <= {GOAL_BYTES_PER_EDGE} B/edge, today ~{TODAY_BYTES_PER_EDGE}"),
        ("whole run peak (VmHWM)", f"{_bpe(w['bytes_per_edge'])} B/edge",
         f"the input as the npz holds it {_bpe(inp['bytes_per_edge'])} B/edge ("
         + ", ".join(f"{k} {v / r['edges']:.1f}" for k, v in inp["input_bytes"].items()) + ")",
         w["ratio_to_input"], "uncompressed arrays"),
    ]
    for label, value, base, ratio, note in rows:
        lines.append(f"  {label}: {value} | baseline: {base} | ratio {_ratio(ratio)}  ({note})")
    if w.get("reported_peak_bytes"):
        lines.append(f"  (the child's own ru_maxrss: {_gb(w['reported_peak_bytes'])} GB; "
                     f"{w['readings']} readings of /proc in {w['seconds']:.2f} s)")
    return lines


def scaling_lines(results: list[dict[str, Any]]) -> list[str]:
    """One row per size: peak bytes per directed edge of each phase and of the whole run."""
    ok = [r for r in results if r["status"] == "measured"]
    if not ok:
        return []
    names = list(dict.fromkeys(n for r in ok for n in r["phases"]))
    cols = ["size", "regime", "method", "nodes", "edges", "seconds", "peak GB", *names, "whole",
            "read-only", "input", "whole/read-only", "peak/est.", "peak/fast", "time/fast",
            "cut %"]
    fast = {(r["size"], r["method"]): r["whole"] for r in ok if r["regime"] == "fast"}
    rows = []
    for r in ok:
        w, f = r["whole"], fast.get((r["size"], r["method"]))
        rows.append([r["size"], r["regime"], r["method"], f"{r['nodes']:,}", f"{r['edges']:,}",
                     f"{w['seconds']:.2f}", _gb(w["peak_bytes"]),
                     *(_bpe(r["phases"].get(n, {}).get("bytes_per_edge")) for n in names),
                     _bpe(w["bytes_per_edge"]), _bpe(r["read_only"]["bytes_per_edge"]),
                     _bpe(r["input"]["bytes_per_edge"]), _ratio(w["ratio_to_read_only"]),
                     _ratio(w["peak_bytes"] / w["estimated_bytes"]),
                     _ratio(w["peak_bytes"] / f["peak_bytes"] if f else None),
                     _ratio(w["seconds"] / f["seconds"] if f else None),
                     _ratio(w.get("edge_cut_pct"))])
    widths = [max(len(c), *(len(v[i]) for v in rows)) + 1 for i, c in enumerate(cols)]
    lines = ["\n== by size: peak bytes per directed edge of each phase, the whole run and the "
             f"baselines (goal: whole <= {GOAL_BYTES_PER_EDGE}, flat or falling with size); "
             "peak/fast, time/fast: against the fast regime's run of the same size"]
    for vals in [cols, *rows]:
        lines.append(" " + "".join(f"{v:>{w}}" for v, w in zip(vals, widths, strict=True)))
    return lines


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """A PNG of the whole-run peak per directed edge and the seconds against the size, one line
    per method and regime (matplotlib: the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if r["status"] == "measured"]
    series: dict[str, list[dict[str, Any]]] = {}
    for r in ok:
        series.setdefault(f"{r['method']} {r['regime']}", []).append(r)
    fig, (mem, sec) = plt.subplots(1, 2, figsize=(10, 4))
    for label, runs in series.items():
        runs = sorted(runs, key=lambda r: r["edges"])
        x = [r["edges"] / 1e6 for r in runs]
        mem.plot(x, [r["whole"]["bytes_per_edge"] for r in runs], marker="o", label=label)
        sec.plot(x, [r["whole"]["seconds"] for r in runs], marker="o", label=label)
    mem.axhline(GOAL_BYTES_PER_EDGE, color="#9e9e9e", linestyle="--", label="goal")
    mem.set_ylim(bottom=0)
    mem.set(xscale="log", xlabel="directed edges (millions)", ylabel="peak bytes per edge",
            title="whole-run peak memory (VmHWM)")
    sec.set(xscale="log", yscale="log", xlabel="directed edges (millions)", ylabel="seconds",
            title="wall time")
    for ax in (mem, sec):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Measure every size, print the tables (or the JSON alone), write the JSON to --out."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--edges", default="10M,50M",
                    help="comma-separated sizes in directed edges, suffixes k/M/G [10M,50M]")
    ap.add_argument("--feat-dim", type=int, default=128, help="feature width [128]")
    ap.add_argument("--parts", type=int, default=4, help="parts [4]")
    ap.add_argument("--avg-degree", type=float, default=20.0,
                    help="directed edges per node: nodes = edges / this [20]")
    ap.add_argument("--regimes", default="fast,lean",
                    help="dglctl partition --regime of each run, per size, in this order: the "
                         "fast one is the baseline of the others [fast,lean]")
    ap.add_argument("--methods", default="metis",
                    help="dglctl partition --method of each run (metis, kaminpar, random): "
                         "each size runs every regime with every method [metis]")
    ap.add_argument("--plot", type=Path, default=None,
                    help="write a PNG of peak bytes per edge and seconds against the size "
                         "(needs matplotlib: pip install -e '.[bench]')")
    ap.add_argument("--json", action="store_true", help="print the JSON only")
    ap.add_argument("--out", type=Path, default=None,
                    help="write partition_scaling.json here (and keep the graphs in OUT/cache)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where the generated graphs are kept and reused [OUT/cache, else "
                         "bench-out/partition_scaling/cache; --smoke: a temporary folder]")
    ap.add_argument("--smoke", action="store_true",
                    help=f"one size of {SMOKE_EDGES} edges, {SMOKE_FEAT_DIM}-wide features: "
                         "does it run? (meaningless numbers)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.edges, args.feat_dim = SMOKE_EDGES, SMOKE_FEAT_DIM
    try:
        sizes = [(s.strip(), parse_size(s)) for s in args.edges.split(",") if s.strip()]
    except ValueError as e:
        ap.error(str(e))
    regimes = [r.strip() for r in args.regimes.split(",") if r.strip()]
    if not regimes or any(r not in ("auto", "fast", "lean") for r in regimes):
        ap.error(f"--regimes: a comma-separated list of auto, fast, lean, got {args.regimes!r}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in ("metis", "kaminpar", "random") for m in methods):
        ap.error(f"--methods: a comma-separated list of metis, kaminpar, random, got "
                 f"{args.methods!r}")
    temporary = None
    cache = args.cache or (args.out / "cache" if args.out else None)
    if cache is None:
        if args.smoke:
            cache = temporary = Path(tempfile.mkdtemp(prefix="dglctl-partition-scaling-"))
        else:
            cache = REPO / "bench-out" / "partition_scaling" / "cache"
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "settings": {"edges": [label for label, _ in sizes], "regimes": regimes,
                     "methods": methods,
                     "feat_dim": args.feat_dim,
                     "parts": args.parts, "avg_degree": args.avg_degree, "smoke": args.smoke,
                     "interval_s": INTERVAL, "goal_bytes_per_edge": GOAL_BYTES_PER_EDGE},
        "machine": machine(), "sizes": []}
    try:
        for label, edges in sizes:
            for method, regime in [(m, r) for m in methods for r in regimes]:
                try:
                    r = measure_size(label, edges, cache=cache, feat_dim=args.feat_dim,
                                     parts=args.parts, avg_degree=args.avg_degree, regime=regime,
                                     method=method)
                except Exception as e:  # noqa: BLE001 - one failed size must not hide the others
                    log(f"{label} {method} {regime}: FAILED\n{traceback.format_exc()}")
                    r = {"status": "failed", "size": label, "regime": regime, "method": method,
                         "edges_asked": edges, "why": f"{type(e).__name__}: {e}"}
                results["sizes"].append(r)
                if not args.json:
                    print("\n".join(size_lines(r)), flush=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    results["seconds"] = time.perf_counter() - t0
    if args.plot is not None:
        plot(results["sizes"], args.plot)
    return report_sizes(results, args.out, "partition_scaling.json", args.json, scaling_lines)


if __name__ == "__main__":
    sys.exit(main())
