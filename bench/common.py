"""What several benchmarks share that is not a job: the repository, graphs and partitions,
timing, the machine's CPU counters, child processes measured from /proc (wall time, peak RSS,
live samples), and the DGL venv of the side-by-side comparisons.

Kept light on purpose (the standard library and numpy): partition_bench's memory baseline is
a fresh process that imports its benchmark module, so nothing heavy may load here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


# The memory lines of /proc/PID/status that proc_status returns, in bytes.
STATUS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def proc_status(pid: int) -> dict[str, int]:
    """The memory lines of ``/proc/PID/status`` (:data:`STATUS_KEYS`), in bytes; empty once
    the process is gone or is a zombie (its memory is freed, the lines are absent)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in STATUS_KEYS:
            out[key] = int(rest.split()[0]) * 1024
    return out


def run_child(cmd: list[str], *, on_sample: Callable[[dict[str, int]], None] | None = None,
              on_stderr_line: Callable[[str, dict[str, int]], None] | None = None,
              interval: float = 0.01, lock: threading.Lock | None = None,
              **popen: Any) -> tuple[int, str, str, float, int]:
    """Run ``cmd``; return (exit code, stdout, stderr, wall seconds, peak RSS in bytes).

    The peak is the child's own VmHWM, read from /proc every ``interval`` seconds (10 ms)
    until it exits. Its ``ru_maxrss`` (wait4, RUSAGE_CHILDREN) would not do: Linux carries the
    RSS high-water mark of the image that called exec into the new program's, so a child of a
    large parent (the figures run holds graphs and torch) would report at least the parent's
    peak.

    ``on_sample(status)`` gets each of those readings (:func:`proc_status`). With
    ``on_stderr_line(line, status)`` the child's stderr is read as it comes, line by line (no
    newline), each line with a reading of the child's status taken as the line arrived, so
    a caller can tell which stage of its work the child is in. The two are called from two
    threads (the sampling loop and the stderr reader); with ``lock``, each reading is taken
    and handed over while holding it, so the callbacks get the readings in the order they were
    taken. The child is reaped only after its stderr is drained, so no reading can come from
    another process that reused its id.
    """
    held = lock if lock is not None else contextlib.nullcontext()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, text=True, **popen,
                                stderr=err if on_stderr_line is None else subprocess.PIPE)
        peak = line_peak = 0  # one per thread: no update of one thread lost to the other
        failed: list[BaseException] = []
        reader = None
        if on_stderr_line is not None:
            stream = proc.stderr
            assert stream is not None

            def pump() -> None:
                nonlocal line_peak
                for line in stream:
                    err.write(line)
                    if failed:
                        continue  # keep draining: the child must not block on a full pipe
                    with held:
                        status = proc_status(proc.pid)
                        line_peak = max(line_peak, status.get("VmHWM", 0))
                        try:
                            on_stderr_line(line.rstrip("\n"), status)
                        except BaseException as e:  # noqa: BLE001 - raised again in the caller
                            failed.append(e)

            reader = threading.Thread(target=pump, name="run_child-stderr", daemon=True)
            reader.start()
        while True:
            with held:
                status = proc_status(proc.pid)
                if status:
                    peak = max(peak, status.get("VmHWM", 0))
                    if on_sample is not None and not failed:
                        try:
                            on_sample(status)
                        except BaseException as e:  # noqa: BLE001 - raised again below
                            failed.append(e)
            # Exited? Asked without reaping (WNOWAIT): the id stays the child's until the
            # stderr reader is done with it.
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                break
            time.sleep(interval)
        wall = time.perf_counter() - t0
        if reader is not None:
            reader.join()
        if proc.stderr is not None:
            proc.stderr.close()
        _, status_code = os.waitpid(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status_code)
        if failed:
            raise failed[0]
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), wall, max(peak, line_peak)


def report_sizes(results: dict[str, Any], out: Path | None, filename: str, as_json: bool,
                 summary: Callable[[list[dict[str, Any]]], list[str]]) -> int:
    """The end of a by-size benchmark (partition_scaling, runtime_scaling): write ``results``
    to ``out/filename`` when ``out`` is given, print the JSON alone (``as_json``) or the
    ``summary`` lines of ``results["sizes"]``; returns the exit status (1 if a size failed)."""
    import json

    text = json.dumps(results, indent=1, default=str)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / filename).write_text(text + "\n")
    if as_json:
        print(text)
    else:
        print("\n".join(summary(results["sizes"])))
        if out is not None:
            print(f"\nwrote {out / filename}")
    return 1 if any(r["status"] != "measured" for r in results["sizes"]) else 0


def epoch_phase_cli(doc: str, prefix: str, measure: Callable[..., dict[str, Any]],
                    report: Callable[[dict[str, Any]], str], *, steps: int,
                    parts: tuple[int, ...] = (2,), repeat: int = 3) -> int:
    """The command line of a benchmark of the example's epoch on loopback machines
    (``bench.epoch_floor``, ``bench.prefetch_bench``): ``--nodes``, ``--avg-degree``,
    ``--steps``, ``--repeat`` (default ``repeat``), ``--workdir``, ``--smoke`` (20k nodes, 5
    steps of batch 200, once: what the suite runs) and ``--json``. Partitions the generated
    graph into each of ``parts`` (once per work folder), then prints ``report(measure(cfgs,
    work, steps=, repeat=, batch_size=))``, ``cfgs`` the part count -> partition config."""
    import argparse
    import json

    from partitioner.generate import generate_graph

    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--steps", type=int, default=steps, help="steps per trainer")
    ap.add_argument("--repeat", type=int, default=repeat, help="rounds of measurements")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="a 20k-node graph, 5 steps of batch 200, once (the suite runs it)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = ap.parse_args()
    nodes, steps, repeat, batch = args.nodes, args.steps, args.repeat, 1000
    if args.smoke:
        nodes, steps, repeat, batch = 20_000, 5, 1, 200
    work = args.workdir or Path(tempfile.mkdtemp(prefix=prefix))
    cfgs = prepare_parts(lambda: generate_graph(nodes, avg_degree=args.avg_degree, seed=0),
                         work, parts)
    r = measure(cfgs, work, steps=steps, repeat=repeat, batch_size=batch)
    r["nodes"] = nodes
    print(json.dumps(r) if args.json else report(r))
    return 0
