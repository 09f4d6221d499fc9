"""Restart benchmark (issue 22): what checkpoints cost, and what a trainer failure costs.

Three figures, each against a baseline measured in the same run:

  1. ``checkpoint``: ``runtime.checkpoint.save`` and ``load_latest`` of a GraphSAGE model
     with Adam plus a learnable ``DistEmbedding`` of every node (64 wide) and its SparseAdam,
     on the 1M-node graph (one trainer, standalone): seconds and bytes, against writing the
     same bytes with one plain ``torch.save`` (the floor of any checkpoint).
  2. ``epoch``: the GraphSAGE example (examples/train_dist.py) on 2 loopback machines for
     ``--steps`` steps per trainer, with ``--checkpoint-every 100`` against without a
     checkpoint directory; runs alternate, ``--repeat`` of each. Goal: under 3 % slower.
  3. ``failure``: the example under ``dglctl launch --max-restarts 1`` with checkpoints every
     ``--every`` steps; trainer 1 is SIGKILLed mid-run. Time lost: from the kill to the
     resumed attempt's first step, plus the work redone since the last checkpoint (from that
     checkpoint to the kill), against a fresh ``dglctl launch`` of the same job to its first
     step.

    python -m bench.restart_bench [--nodes N] [--part checkpoint|epoch|failure|all]
    python -m bench.restart_bench --smoke --json   # every figure on a 20k-node graph (tests)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, prepare_parts
from bench.epoch_bench import run_epoch
from bench.jobs import cli_env, local_cluster_file

CHECKPOINT_CHILD = textwrap.dedent('''
    """Save and load one checkpoint of a GraphSAGE model + Adam + a DistEmbedding of every
    node + SparseAdam (standalone); prints JSON."""
    import json, os, sys, time
    from pathlib import Path
    import torch
    import torch.nn.functional as F
    import runtime
    from runtime import checkpoint
    from runtime.embedding import DistEmbedding
    from runtime.nn import SAGE
    from runtime.optim import SparseAdam

    part_config, folder, repeat = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    runtime.initialize()
    g = runtime.DistGraph("bench", part_config=part_config)
    model = SAGE(g.ndata["feat"].shape[1], 64, 8, 2, F.relu, 0.5)
    opt = torch.optim.Adam(model.parameters())
    emb = DistEmbedding(g.num_nodes(), 64, name="node_emb")
    sparse = SparseAdam([emb], lr=0.01)
    every = torch.arange(g.num_nodes())
    loss = emb(every[:1000]).sum() + sum(p.sum() for p in model.parameters())
    loss.backward()  # optimizer state exists (Adam's moments) before the first save
    opt.step()
    sparse.step()
    out = {"save_s": [], "load_s": [], "plain_s": []}
    for i in range(repeat):
        t0 = time.perf_counter()
        path = checkpoint.save(folder, i, model=model, optimizer=opt,
                               sparse_optimizers=[sparse], embeddings=[emb], keep=1)
        out["save_s"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = checkpoint.load_latest(folder, model=model, optimizer=opt,
                                     sparse_optimizers=[sparse], embeddings=[emb])
        out["load_s"].append(time.perf_counter() - t0)
        assert got is not None and got.step == i
        # The floor: the same tensors (gathered, as a save must) in one plain torch.save,
        # fsynced.
        t0 = time.perf_counter()
        state = {"model": model.state_dict(), "opt": opt.state_dict(),
                 "emb": emb.weight[every], "sparse": sparse.local_state_dict()}
        with open(folder / "plain.pt", "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        out["plain_s"].append(time.perf_counter() - t0)
    out["bytes"] = sum(p.stat().st_size for p in path.iterdir())
    out["plain_bytes"] = (folder / "plain.pt").stat().st_size
    out["nodes"] = g.num_nodes()
    print(json.dumps(out))
''')


def checkpoint_figure(part_config: Path, work: Path, repeat: int) -> dict[str, Any]:
    """Save and load seconds and bytes of one checkpoint (figure 1)."""
    script = work / "checkpoint_child.py"
    script.write_text(CHECKPOINT_CHILD)
    folder = work / "ckpt-figure"
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": "0", "WORLD_SIZE": "1"}
    for k in ("DGLCTL_ROLE", "DGLCTL_IP_CONFIG"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, str(script), str(part_config), str(folder),
                          str(repeat)], cwd=REPO, env=env, check=True, capture_output=True,
                         text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    med = {k: statistics.median(r[k]) for k in ("save_s", "load_s", "plain_s")}
    say(f"checkpoint of {r['nodes']:,} nodes (SAGE + Adam, DistEmbedding {r['nodes']:,} x 64 "
          f"+ SparseAdam): {r['bytes'] / 2**20:.0f} MiB (plain torch.save "
          f"{r['plain_bytes'] / 2**20:.0f} MiB)")
    say(f"  save {med['save_s']:.2f}s (runs {_fmt(r['save_s'])}), load {med['load_s']:.2f}s "
          f"(runs {_fmt(r['load_s'])}); plain torch.save {med['plain_s']:.2f}s: save / plain = "
          f"{med['save_s'] / med['plain_s']:.2f}x")
    return {**r, "median": med}


def say(text: str) -> None:
    """A line of the report: on stdout, or on stderr with ``--json`` (stdout is the JSON)."""
    print(text, file=sys.stderr if _JSON else sys.stdout, flush=True)


_JSON = False


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def epoch_figure(part_config: Path, work: Path, steps: int, repeat: int) -> dict[str, Any]:
    """Epoch seconds with checkpoints every 100 steps against none, alternating (figure 2)."""
    times: dict[str, list[float]] = {"none": [], "every100": []}
    for i in range(repeat):
        for kind in ("none", "every100") if i % 2 == 0 else ("every100", "none"):
            extra: list[str] = []
            if kind == "every100":
                folder = work / f"ckpt-epoch-{i}"
                extra = ["--checkpoint-dir", str(folder), "--checkpoint-every", "100"]
            r = run_epoch(part_config, work, hosts=2, steps_per_trainer=steps,
                          extra_args=extra)
            times[kind].append(r["epoch_s"])
    none, every = statistics.median(times["none"]), statistics.median(times["every100"])
    say(f"epoch of {steps} steps per trainer, 2 machines: without checkpoints {none:.2f}s "
          f"(runs {_fmt(times['none'])}), --checkpoint-every 100 {every:.2f}s "
          f"(runs {_fmt(times['every100'])}): {100 * (every / none - 1):+.1f}% "
          "(goal: under +3%)")
    return {"steps": steps, "times": times, "slowdown": every / none - 1}


class _Lines:
    """The lines of a child's stdout and stderr as they come, each with its arrival time."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._read, args=(s,), daemon=True)
                        for s in (proc.stdout, proc.stderr)]
        for t in self.threads:
            t.start()

    def _read(self, stream) -> None:
        for line in stream:
            with self.lock:
                self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float, after: float = 0.0) -> float:
        """The arrival time of the first line after ``after`` that holds ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for t, line in self.lines:
                    if t >= after and text in line:
                        return t
            time.sleep(0.05)
        raise TimeoutError(f"no line with {text!r} within {timeout:.0f}s:\n"
                           + "\n".join(line for _, line in self.lines[-30:]))

    def last_before(self, text: str, when: float) -> tuple[float, str] | None:
        with self.lock:
            found = [(t, line) for t, line in self.lines if t <= when and text in line]
        return found[-1] if found else None

    def join(self) -> str:
        for t in self.threads:
            t.join()
        return "\n".join(line for _, line in self.lines)


def _launch(cluster: Path, part_config: Path, work: Path, args: list[str],
            restarts: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dglctl", "launch", "--max-restarts", str(restarts),
         "--cluster", str(cluster), "--part-config", str(part_config),
         str(REPO / "examples" / "train_dist.py"), *args],
        cwd=work, env=cli_env(work), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _trainer_pid(work: Path, name: str) -> int:
    """The pid of process ``name`` of the newest job recorded under ``work``."""
    jobs = sorted((work / "home" / "jobs").glob("*.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(jobs[-1].read_text())
    rec = next(p for p in record["procs"] if p["name"] == name)
    return int(Path(rec["log"]).with_suffix(".pid").read_text())


def failure_figure(part_config: Path, work: Path, steps: int, every: int,
                   timeout: float, batch_size: int = 1000) -> dict[str, Any]:
    """Time lost to one SIGKILLed trainer against a fresh launch (figure 3)."""
    cluster = local_cluster_file(work / "restart-cluster.yaml", hosts=2)
    base = ["--graph-name", "bench", "--num-epochs", "1", "--max-steps", str(steps),
            "--batch-size", str(batch_size), "--no-eval", "--checkpoint-every", str(every)]
    # A fresh launch, to its first step (the first checkpoint line comes after `every` steps;
    # the first step is taken when the example prints that it starts training).
    t0 = time.monotonic()
    proc = _launch(cluster, part_config, work, [*base, "--checkpoint-dir",
                                                str(work / "ckpt-fresh")], 0)
    lines = _Lines(proc)
    try:
        first = lines.wait_for("training from step", timeout)
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout)
    fresh = first - t0
    lines.join()
    # The same job, trainer 1 killed after its second checkpoint.
    proc = _launch(cluster, part_config, work, [*base, "--checkpoint-dir",
                                                str(work / "ckpt-killed")], 1)
    lines = _Lines(proc)
    try:
        lines.wait_for(f"checkpoint step {2 * every} saved", timeout)
        time.sleep(0.5 * every / 10)  # somewhere between two checkpoints
        os.kill(_trainer_pid(work, "trainer-1-0"), signal.SIGKILL)
        killed = time.monotonic()
        resumed = lines.wait_for("training from step", timeout, after=killed)
        code = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout)
    saved = lines.last_before("saved", killed)
    out = lines.join()
    if code != 0:
        raise RuntimeError(f"the restarted job failed ({code}):\n{out[-3000:]}")
    redone = killed - saved[0] if saved else float("nan")
    lost = resumed - killed + redone
    say(f"one trainer SIGKILLed (checkpoints every {every} steps): from the kill to the next "
          f"attempt's first step {resumed - killed:.1f}s, work redone since the checkpoint "
          f"{redone:.1f}s: {lost:.1f}s lost; a fresh launch to its first step {fresh:.1f}s "
          f"(lost / fresh = {lost / fresh:.2f}x)")
    return {"kill_to_resume_s": resumed - killed, "redone_s": redone, "lost_s": lost,
            "fresh_launch_s": fresh}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--part", choices=["checkpoint", "epoch", "failure", "all"], default="all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300, help="steps per trainer (epoch figure)")
    ap.add_argument("--every", type=int, default=20, help="checkpoint every (failure figure)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="every figure on a 20k-node graph, once (the test suite's run)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    global _JSON
    _JSON = args.json
    if args.smoke:
        args.nodes, args.steps, args.repeat, args.every = 20_000, 12, 1, 4
    from partitioner.generate import generate_graph

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-restart-"))
    parts = prepare_parts(lambda: generate_graph(args.nodes, avg_degree=args.avg_degree, seed=0),
                          work, (1, 2))
    saved = work / "restart_bench.json"  # one part at a time adds to the figures of the others
    results: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
    results["nodes"] = args.nodes
    if args.part in ("checkpoint", "all"):
        results["checkpoint"] = checkpoint_figure(parts[1], work, args.repeat)
    if args.part in ("epoch", "all"):
        results["epoch"] = epoch_figure(parts[2], work, args.steps, args.repeat)
    if args.part in ("failure", "all"):
        results["failure"] = failure_figure(parts[2], work, 6 * args.every, args.every,
                                            args.timeout, 100 if args.smoke else 1000)
    saved.write_text(json.dumps(results, indent=1))
    say(f"results: {saved}")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
