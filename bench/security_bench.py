"""What the transport's liveness and authentication cost: remote pulls and sampling through
the servers, for code before them, and now unencrypted and encrypted, alternating in one run.

Each measurement is its own process pair (2 machines on 127.0.0.1/127.0.0.2, one server
each, this process's child as machine 0's trainer): 10k random rows x 128 float32 of the
other machine, and 2-layer [10, 25] sampling of 1000 seeds, median of ``--repeat``.
``--before REV`` measures that commit too (a git worktree under the work folder), e.g. the
commit before the stall and authentication changes.

    python -m bench.security_bench --before f17df9f   (from the repository root)

Each measurement's child runs this file by its path (``--measure``, PYTHONPATH: the measured
tree first), so that it imports ``runtime`` and the test helpers of that tree: nothing at the
top of this file may import from ``bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]  # not bench.common's: see the docstring

IPS = ["127.0.0.1", "127.0.0.2"]


def measure(part_config: Path, work: Path, encrypt: bool, repeat: int) -> dict[str, float]:
    """In this process (the code under test is whatever ``runtime`` imports here): start the
    servers, time pulls and sampling as machine 0's trainer, stop the servers."""
    import runtime as dg
    from runtime.env import RuntimeEnv
    from runtime.rpc.ip_config import write_ip_config
    from runtime.sampling.neighbor import NeighborSampler
    from testing.ports import free_port_range
    from testing.procs import terminate_groups

    ip_config = work / f"ip_{uuid.uuid4().hex[:6]}.txt"
    write_ip_config(ip_config, [(ip, free_port_range(IPS, 1)) for ip in IPS])
    job, token = "s" + uuid.uuid4().hex[:8], uuid.uuid4().hex

    def env(role: str, m: int) -> dict[str, str]:
        e = RuntimeEnv(role, job, token, m, str(ip_config), str(part_config), timeout=60)
        # Older code has no 'encrypt' field and ignores the variable.
        return {**os.environ, **e.to_environ(), "DGLCTL_ENCRYPT": "1" if encrypt else "0",
                "PYTHONPATH": os.environ.get("PYTHONPATH", "")}

    servers = [subprocess.Popen([sys.executable, "-m", "runtime.server"], env=env("server", m),
                                start_new_session=True) for m in range(len(IPS))]
    try:
        os.environ.update(env("trainer", 0))
        dg.initialize()
        g = dg.DistGraph("bench")
        book = g.get_partition_book()
        rng = np.random.default_rng(0)
        remote = np.asarray(book.partid2nids(1))
        feat = g.ndata["feat"]
        rows = [rng.choice(remote, 10_000) for _ in range(repeat)]
        feat[rows[0]]
        pulls = []
        for ids in rows:
            t0 = time.perf_counter()
            feat[ids]
            pulls.append(time.perf_counter() - t0)
        sampler = NeighborSampler([10, 25])
        seeds = [rng.choice(g.num_nodes(), 1000, replace=False) for _ in range(repeat)]
        sampler.sample_blocks(seeds[0], g)
        samples = []
        for s in seeds:
            t0 = time.perf_counter()
            sampler.sample_blocks(s, g)
            samples.append(time.perf_counter() - t0)
        nbytes = 10_000 * feat.shape[1] * 4
        return {"pull_gbs": nbytes / statistics.median(pulls) / 1e9,
                "sample_ms": statistics.median(samples) * 1e3,
                "code": str(Path(dg.__file__).parents[1])}
    finally:
        dg.exit_client()
        terminate_groups(servers, grace=30)


def prepare(work: Path, nodes: int) -> Path:
    """A 2-part partition of a generated graph with 128 features (kept between runs)."""
    from bench.common import prepare_parts
    from partitioner.generate import generate_graph

    return prepare_parts(lambda: generate_graph(nodes, feat_dim=128, seed=0), work, (2,))[2]


def run_variant(tree: Path, cfg: Path, work: Path, encrypt: bool, repeat: int) -> dict:
    """One measurement in a child process running ``tree``'s code."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "security_bench.py"), "--measure", str(cfg),
         "--workdir", str(work), "--repeat", str(repeat)] + (["--encrypt"] if encrypt else []),
        cwd=work, env={**os.environ, "PYTHONPATH": f"{tree}:{REPO}"}, check=True,
        stdout=subprocess.PIPE, text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--before", help="also measure this commit (a git worktree)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--encrypt", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-sec-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(args.measure, work, args.encrypt, args.repeat)))
        return 0
    cfg = prepare(work, args.nodes)
    variants = [("now", REPO, False), ("now, encrypted", REPO, True)]
    if args.before:
        tree = work / f"before-{args.before}"
        if not tree.exists():
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree),
                            args.before], check=True, stdout=subprocess.DEVNULL)
        variants.insert(0, (f"before ({args.before})", tree, False))
    results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for i in range(args.rounds):
        order = variants if i % 2 == 0 else variants[::-1]
        for name, tree, encrypt in order:
            r = run_variant(tree, cfg, work, encrypt, args.repeat)
            results[name].append(r)
            print(f"round {i + 1} {name} ({r['code']}): pull {r['pull_gbs']:.2f} GB/s, "
                  f"sample {r['sample_ms']:.2f} ms", flush=True)
    base = variants[0][0]
    for name, runs in results.items():
        pull = [r["pull_gbs"] for r in runs]
        samp = [r["sample_ms"] for r in runs]
        ratio = [r["pull_gbs"] / b["pull_gbs"] for r, b in zip(runs, results[base], strict=True)]
        print(f"{name:<24} pull {min(pull):.2f}-{max(pull):.2f} GB/s (x{min(ratio):.2f}-"
              f"{max(ratio):.2f} of {base}), sample {min(samp):.2f}-{max(samp):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
