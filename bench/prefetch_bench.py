"""How long the trainer waits for its batches: the GraphSAGE example's epoch with batches made
in the step (``DGLCTL_PREFETCH=0``), made ahead on the trainer's prefetch thread (the default
with 0 sampler processes), and made by 1 sampler process per trainer.

Same set-up as ``bench/epoch_bench.py`` (2 loopback machines, 1 server + 1 trainer each, one
thread per trainer, fanouts [10, 25], batch 1000), and the same on 1 machine; the set-ups and
modes alternate in each round.
The example's ``sample`` time is the trainer's wait for the loader's next batch, its
``fetch`` the feature reads of the step (rows the prefetch thread pulled ahead take none).

On a 2-core machine, 2 machines' two servers and two trainers leave no core idle: the
prefetch thread's work (its share of the sampling, the blocks, the CSR, the local rows) then
takes the core from the step, and the wait it hides comes back as slower compute. On 1
machine (a server and a trainer on 2 cores) the thread has the core the server leaves idle:
that is the overlap a machine with a core per process shows on 2 machines (run it there as
is).

    python -m bench.prefetch_bench [--nodes N] [--steps S] [--repeat R] [--smoke] [--json]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common import epoch_phase_cli
from bench.epoch_bench import run_epoch

HOSTS = (2, 1)  # loopback machines, one server and one trainer each
# mode -> (sampler processes per trainer, extra environment)
MODES: dict[str, tuple[int, dict[str, str]]] = {
    "in the step": (0, {"DGLCTL_PREFETCH": "0"}),
    "prefetch thread": (0, {}),
    "1 sampler": (1, {}),
}


def measure(cfgs: dict[int, Path], work: Path, *, steps: int, repeat: int,
            batch_size: int = 1000, fan_out: str = "10,25") -> dict[str, Any]:
    """Every mode on 2 machines and on 1 once per round (``repeat`` rounds), in a rotating
    order; per set-up and mode the median epoch, wait (``sample``) and step's feature read
    (``fetch``) seconds, the wait's share, and each run's mean loss (the same batches in
    every mode: the same losses)."""
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {
        (h, m): [] for h in HOSTS for m in MODES}
    order = list(runs)
    for r in range(repeat):
        for hosts, name in order[r % len(order):] + order[:r % len(order)]:
            samplers, env = MODES[name]
            runs[(hosts, name)].append(run_epoch(
                cfgs[hosts], work, hosts=hosts, steps_per_trainer=steps,
                batch_size=batch_size, fan_out=fan_out, num_samplers=samplers, env=env))
    out: dict[str, Any] = {"steps": steps, "rounds": repeat, "setups": {}}
    for (hosts, name), rs in runs.items():
        epoch = statistics.median(x["epoch_s"] for x in rs)
        wait = statistics.median(x["split"]["sample"] for x in rs)
        modes = out["setups"].setdefault(f"{hosts} hosts", {})
        modes[name] = {
            "epoch_s": epoch, "wait_s": wait, "fetch_s": statistics.median(
                x["split"]["fetch"] for x in rs),
            "compute_s": statistics.median(
                x["split"]["forward"] + x["split"]["backward"] for x in rs),
            "wait_share": wait / epoch, "epochs_s": [x["epoch_s"] for x in rs],
            "waits_s": [x["split"]["sample"] for x in rs], "losses": [x["loss"] for x in rs]}
    for modes in out["setups"].values():
        base = modes["in the step"]["epoch_s"]
        for m in modes.values():
            m["epoch_vs_step"] = m["epoch_s"] / base
    return out


def report(r: dict[str, Any]) -> str:
    lines = [f"trainer's wait for batches, {r['steps']} steps per trainer, median of "
             f"{r['rounds']} rounds (set-ups and modes alternating):",
             f"{'set-up':<8} {'mode':<16} {'epoch s':>8} {'wait s':>8} {'wait %':>7} "
             f"{'fetch s':>8} {'fwd+bwd s':>9} {'epoch vs step':>14}"]
    for setup, modes in r["setups"].items():
        for name, m in modes.items():
            lines.append(f"{setup:<8} {name:<16} {m['epoch_s']:8.2f} {m['wait_s']:8.2f} "
                         f"{100 * m['wait_share']:6.1f}% {m['fetch_s']:8.2f} "
                         f"{m['compute_s']:9.2f} {m['epoch_vs_step']:13.2f}x")
    return "\n".join(lines)


def main() -> int:
    return epoch_phase_cli(__doc__ or "", "dglctl-prefetch-", measure, report, steps=30,
                           parts=tuple(sorted(HOSTS)))


if __name__ == "__main__":
    sys.exit(main())
