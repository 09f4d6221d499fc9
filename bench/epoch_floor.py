"""Each phase of the epoch against its floor, measured in the same run (issue 23).

The example's epoch set-up (bench/epoch_bench.py: a generated community graph, 2 loopback
machines, one server and one trainer each, 0 samplers, GraphSAGE [10, 25] hidden 64, batch
1000) runs ``--steps`` steps per trainer in ``bench/scripts/floor_trainer.py``, which keeps
each batch; trainer 0 then times, on those batches and alternating ``--repeat`` times:

- forward and backward of ``runtime.nn.SAGE`` against (a) a bare torch loop of the same
  arithmetic on adjacency matrices built beforehand, the features already in memory;
- the feature fetch (``g.ndata["feat"][input_nodes]``) against (b) the same remote bytes
  moved by bare pyzmq from the other trainer's process plus a numpy gather of the local rows;
- the sampling (the loader's wait per batch in the epoch) against (c) the same sampling in
  the trainer's process on its local partition, blocks built.

Prints each phase, its floor and the ratio (the goal: each within 1.25x). Every trainer runs
one thread (OMP_NUM_THREADS=1, as configs/local.yaml): each emulated host is a one-core
machine on this 2-core one.

    python -m bench.epoch_floor [--nodes N] [--steps S] [--repeat R] [--smoke] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import prepare_parts
from bench.jobs import run_trainers

PHASES = ("sample", "fetch", "forward", "backward")


def measure(part_config: Path, work: Path, *, steps: int, repeat: int, batch_size: int = 1000,
            timeout: float = 1800.0) -> dict[str, Any]:
    """Run the two floor trainers against the partition's servers; trainer 0's figures."""
    outs = run_trainers(part_config, work, [
        "bench/scripts/floor_trainer.py", "--steps", str(steps), "--repeat", str(repeat),
        "--batch-size", str(batch_size), "--rendezvous", str(work)], timeout=timeout,
        what="floor trainer")
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("{"))
    result = json.loads(line)
    result["ratio"] = {k: result["ours"][k] / max(result["floor"][k], 1e-9) for k in PHASES}
    return result


def report(r: dict[str, Any]) -> str:
    """The table people read."""
    lines = [f"{r['steps']} steps of trainer 0, {r['threads']} thread(s); "
             f"{r['remote_bytes'] / 1e6:.1f} MB of remote feature rows",
             f"{'phase':<9} {'ours':>9} {'floor':>9} {'ratio':>7}"]
    for k in PHASES:
        lines.append(f"{k:<9} {r['ours'][k]:>8.3f}s {r['floor'][k]:>8.3f}s "
                     f"{r['ratio'][k]:>6.2f}x")
    lines.append("(sample: the loader's wait per batch in the epoch, against the same sampling "
                 "in-process on the local partition; fetch, forward, backward: best of "
                 "--repeat on the kept batches, alternating with their floors)")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--steps", type=int, default=30, help="steps per trainer")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="a 20k-node graph, 5 steps of batch 200, once (the suite runs it)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = ap.parse_args()
    from partitioner.generate import generate_graph

    nodes, steps, repeat, batch = args.nodes, args.steps, args.repeat, 1000
    if args.smoke:
        nodes, steps, repeat, batch = 20_000, 5, 1, 200
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-floor-"))
    cfg = prepare_parts(lambda: generate_graph(nodes, avg_degree=args.avg_degree, seed=0),
                        work, (2,))[2]
    r = measure(cfg, work, steps=steps, repeat=repeat, batch_size=batch)
    r["nodes"] = nodes
    print(json.dumps(r) if args.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
