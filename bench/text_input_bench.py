"""Reading a text edge list: parsed into memory (the fast regime) against parsed a chunk at a
time into memory-mapped files (the lean regime), with the same graph as an npz (mapped, not
parsed) as the floor, all in the same run.

For one size E (directed edges, 20M by default) this writes a random graph of E/20 nodes as a
text edge list (``src dst`` per line) and as an npz, then runs ``dglctl partition --estimate``
(read the input, print the plan, exit) as a child process for each of: the text with
``--regime fast``, the text with ``--regime lean``, the npz. For each it prints the seconds,
the child's peak RSS (VmHWM, read from /proc every 10 ms), that peak less the interpreter's
(a child that imports the same modules and exits, measured in the same run) per directed
edge, the same for the anonymous memory alone ("heap": RssAnon, what the kernel cannot
reclaim; the rest of the peak is pages of mapped files, which it can), and the ratios to the
in-memory parse. The parsed arrays are 16 bytes per edge (int64
src and dst); the in-memory parse holds them plus numpy's parse buffers.

    python -m bench.text_input_bench [--edges 20M] [--out DIR] [--json] [--smoke]

--smoke: 30k edges in a temporary folder: checks that the benchmark runs.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, report_sizes, run_child
from bench.partition_scaling import parse_size

INTERVAL = 0.01
SMOKE_EDGES = "30k"
# Lines written at a time: the writer holds one block of text.
_BLOCK = 1 << 22
_READ_DONE = re.compile(r"^\s*read done in ([0-9.]+)s")


def log(msg: str) -> None:
    print(f"[text_input] {msg}", file=sys.stderr, flush=True)


def write_inputs(folder: Path, edges: int, seed: int = 0) -> tuple[Path, Path]:
    """A random graph of ``edges`` directed edges over ``edges // 20`` nodes, as ``g.txt``
    and ``g.npz`` in ``folder``."""
    import numpy as np

    from partitioner.graph import Graph
    from partitioner.readers import write_npz
    from partitioner.readers.text_writer import format_edge_lines

    nodes = max(2, edges // 20)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges)
    dst = rng.integers(0, nodes, edges)
    src[0], dst[0] = nodes - 1, 0  # the largest id is there: both inputs have `nodes` nodes
    text = folder / "g.txt"
    with open(text, "wb") as fh:
        for lo in range(0, edges, _BLOCK):
            fh.write(format_edge_lines(src[lo:lo + _BLOCK], dst[lo:lo + _BLOCK]))
    npz = folder / "g.npz"
    write_npz(Graph.homogeneous(src, dst, nodes), npz)
    return text, npz


def run_measured(cmd: list[str]) -> tuple[int, str, float, int, int]:
    """Run ``cmd`` in the repository: exit code, stderr, wall seconds, peak RSS and peak
    anonymous RSS (RssAnon, read beside VmHWM every :data:`INTERVAL`)."""
    anon = [0]

    def sample(status: dict[str, int]) -> None:
        anon[0] = max(anon[0], status.get("RssAnon", 0))

    code, _, err, wall, peak = run_child(cmd, cwd=REPO, interval=INTERVAL, on_sample=sample)
    return code, err, wall, peak, anon[0]


def interpreter_peak() -> tuple[int, int]:
    """Peak RSS and peak anonymous RSS of a child that imports what ``dglctl partition``
    imports to read, and exits."""
    code, err, _, peak, anon = run_measured(
        [sys.executable, "-c", "import numpy, dglctl.cli, partitioner.readers, "
         "partitioner.pipeline"])
    if code != 0:
        raise RuntimeError(f"the import-only child exited {code}: {err.strip()[-2000:]}")
    return peak, anon


def measure_read(path: Path, regime: str, out: Path) -> dict[str, Any]:
    """``dglctl partition --estimate`` of ``path`` under ``regime``: seconds, peaks, and the
    child's own read seconds."""
    cmd = [sys.executable, "-m", "dglctl", "partition", "--input", str(path), "--num-parts",
           "2", "--out", str(out), "--regime", regime, "--estimate"]
    code, err, wall, peak, anon = run_measured(cmd)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {err.strip()[-2000:]}")
    read_s = next((float(m.group(1)) for m in map(_READ_DONE.match, err.splitlines()) if m),
                  None)
    return {"command": cmd, "seconds": wall, "read_seconds": read_s, "peak_bytes": peak,
            "peak_anon_bytes": anon, "streamed": "parsed a chunk at a time" in err}


def run(edges: int, folder: Path) -> dict[str, Any]:
    """The three reads of one size, and the interpreter's peak."""
    t0 = time.perf_counter()
    text, npz = write_inputs(folder, edges)
    log(f"wrote {edges:,} edges: {text.stat().st_size / 2**20:.0f} MiB of text, "
        f"{npz.stat().st_size / 2**20:.0f} MiB npz, in {time.perf_counter() - t0:.1f}s")
    base, base_anon = interpreter_peak()
    rows = {}
    for name, path, regime in (("text, in memory (fast)", text, "fast"),
                               ("text, streamed (lean)", text, "lean"),
                               ("npz, mapped (floor)", npz, "lean")):
        log(f"{name}: dglctl partition --estimate --regime {regime}")
        r = measure_read(path, regime, folder / "unused")
        r["bytes_per_edge"] = max(0, r["peak_bytes"] - base) / edges
        r["anon_bytes_per_edge"] = max(0, r["peak_anon_bytes"] - base_anon) / edges
        rows[name] = r
    fast = rows["text, in memory (fast)"]
    for r in rows.values():
        r["peak_ratio_to_fast"] = (r["peak_bytes"] - base) / max(1, fast["peak_bytes"] - base)
        r["seconds_ratio_to_fast"] = r["seconds"] / fast["seconds"]
    return {"status": "measured", "edges": edges, "text_bytes": text.stat().st_size,
            "interpreter_peak_bytes": base, "interpreter_peak_anon_bytes": base_anon,
            "reads": rows}


def lines(result: dict[str, Any]) -> list[str]:
    """The table of one size."""
    if result.get("status") != "measured":
        return [f"{result.get('edges')}: {result.get('status')} ({result.get('why')})"]
    out = [f"{result['edges']:,} directed edges, {result['text_bytes'] / 2**20:.0f} MiB of "
           f"text; interpreter and imports alone: {result['interpreter_peak_bytes'] / 2**20:.0f}"
           f" MiB",
           f"{'input':<26}{'seconds':>9}{'read s':>8}{'peak':>10}{'B/edge':>8}"
           f"{'heap B/edge':>13}{'peak/fast':>11}{'time/fast':>11}"]
    for name, r in result["reads"].items():
        read_s = f"{r['read_seconds']:.2f}" if r["read_seconds"] is not None else "?"
        out.append(f"{name:<26}{r['seconds']:>9.2f}{read_s:>8}"
                   f"{r['peak_bytes'] / 2**20:>7.0f}MiB{r['bytes_per_edge']:>8.1f}"
                   f"{r['anon_bytes_per_edge']:>13.1f}{r['peak_ratio_to_fast']:>11.2f}{r['seconds_ratio_to_fast']:>11.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (or the JSON alone), write the JSON to --out."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--edges", default="20M", help="directed edges, suffixes k/M/G [20M]")
    ap.add_argument("--json", action="store_true", help="print the JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write text_input.json here")
    ap.add_argument("--smoke", action="store_true",
                    help=f"{SMOKE_EDGES} edges: does it run? (meaningless numbers)")
    args = ap.parse_args(argv)
    try:
        edges = parse_size(SMOKE_EDGES if args.smoke else args.edges)
    except ValueError as e:
        ap.error(str(e))
    folder = Path(tempfile.mkdtemp(prefix="dglctl-text-input-"))
    t0 = time.perf_counter()
    try:
        result = run(edges, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results = {"settings": {"edges": edges, "smoke": args.smoke, "interval_s": INTERVAL},
               "sizes": [result], "seconds": time.perf_counter() - t0}
    return report_sizes(results, args.out, "text_input.json", args.json,
                        lambda sizes: [line for r in sizes for line in lines(r)])


if __name__ == "__main__":
    sys.exit(main())
