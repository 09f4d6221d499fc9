"""Launch to the first training step through Slurm's srun against SSH, on the same two hosts
(127.0.0.1 and 127.0.0.2 of this machine), the same partition and first-step script, in one
run, alternating:

  ssh:    ``dglctl launch --cluster ssh.yaml`` over a real sshd (testing/sshd.py)
  slurm:  ``salloc -N2 dglctl launch --cluster slurm.yaml`` on a real Slurm (slurmctld and two
          slurmd, n1 and n2: testing/slurm.py); the allocation's time is counted

Each figure is the median seconds from the command's start to the first step's end (the
step's own clock), with the launcher's phases (preflight, copy, servers, trainers); the first
launch of each (which copies the shards) is reported apart. Needs root, openssh-server, Slurm
and munge (tests/setup_sshd.sh, tests/setup_slurm.sh).

    python -m bench.slurm_launch [--repeat 3] [--nodes 100000] [--json]   (repository root)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import prepare_parts
from bench.jobs import free_base, ssh_cluster_file
from bench.launch_bench import launch_once, write_first_step


def slurm_cluster_file(path: Path, nodes: list[str]) -> Path:
    """A ``transport: slurm`` cluster like ssh_cluster_file's: one server and one trainer a
    node, one thread each, a free port base on the nodes' addresses."""
    path.write_text(yaml.safe_dump({
        "transport": "slurm", "workspace": str(path.parent / "slurm-ws"),
        "python": sys.executable, "trainers_per_host": 1, "servers_per_host": 1,
        "samplers_per_trainer": 0, "port_base": free_base(nodes, 1),
        "env": {"OMP_NUM_THREADS": "1"}}))
    return path


def measure(work: Path, nodes: int, repeat: int, log=lambda _m: None) -> dict[str, Any]:
    """Both launches, alternating, ``repeat`` times after a first (copying) one each."""
    from partitioner.generate import generate_graph
    from testing.slurm import NODES, start_slurm
    from testing.sshd import start_sshd

    cfg = prepare_parts(lambda: generate_graph(nodes, avg_degree=20.0, seed=0), work, (2,))[2]
    script = write_first_step(work)
    sshd = start_sshd(work / "sshd")
    slurm = start_slurm(work / "slurm")
    try:
        kinds = {
            "ssh": (ssh_cluster_file(work / "ssh.yaml", sshd, hosts=2), (), {}),
            "slurm": (slurm_cluster_file(work / "slurm.yaml", list(NODES.values())),
                      ("salloc", "-N2"), slurm.env),
        }
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        first: dict[str, dict[str, Any]] = {}
        for i in range(repeat + 1):
            for kind, (cluster, prefix, env) in kinds.items():
                log(f"{kind}: launch {i + 1}/{repeat + 1}" + (" (copies)" if i == 0 else ""))
                r = launch_once(cluster, cfg, script, work, prefix=prefix, env=env)
                (runs[kind].append(r) if i else first.__setitem__(kind, r))
    finally:
        slurm.stop()
        sshd.stop()
    out: dict[str, Any] = {"nodes": nodes, "repeat": repeat}
    for kind, rs in runs.items():
        out[kind] = {"first_step_s": statistics.median(r["first_step_s"] for r in rs),
                     "runs": [round(r["first_step_s"], 3) for r in rs],
                     "steps": {k: statistics.median(r["steps"][k] for r in rs)
                               for k in rs[0]["steps"]},
                     "first_launch_s": first[kind]["first_step_s"]}
    out["slurm_over_ssh"] = out["slurm"]["first_step_s"] / out["ssh"]["first_step_s"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000, help="graph nodes (2 parts)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    ap.add_argument("--smoke", action="store_true", help="5k nodes, one run each")
    args = ap.parse_args()
    if args.smoke:
        args.nodes, args.repeat = 5_000, 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-slurm-launch-"))
    r = measure(work, args.nodes, args.repeat, log=lambda m: print(m, file=sys.stderr))
    out = sys.stderr if args.json else sys.stdout
    for kind in ("ssh", "slurm"):
        k = r[kind]
        phases = ", ".join(f"{name} {s:.2f}s" for name, s in k["steps"].items())
        print(f"{kind}: launch to first step {k['first_step_s']:.2f}s (median of "
              f"{args.repeat}: {k['runs']}; {phases}); first launch, copying: "
              f"{k['first_launch_s']:.2f}s", file=out)
    print(f"srun / SSH: {r['slurm_over_ssh']:.2f}x (same hosts, same run)", file=out)
    if args.json:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
