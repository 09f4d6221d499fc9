"""How long the trainer waits for its batches: the GraphSAGE example's epoch with batches made
in the step (``DGLCTL_PREFETCH=0``), made ahead on the trainer's prefetch thread (the default
with 0 sampler processes), and made by 1 sampler process per trainer.

Same set-up as ``bench/epoch_bench.py`` (2 loopback machines, 1 server + 1 trainer each, one
thread per trainer, fanouts [10, 25], batch 1000), the three modes alternating in each round.
The example's ``sample`` time is the trainer's wait for the loader's next batch, its
``fetch`` the feature reads of the step (rows the prefetch thread pulled ahead take none).

On this 2-core machine the two servers, two trainers and their threads share 2 cores: the
servers are the bottleneck, so the wait cannot reach its goal here (under 5 % of the epoch
when servers are not the bottleneck); the figure that says so needs a machine with a core per
process (run it there as is).

    python -m bench.prefetch_bench [--nodes N] [--steps S] [--repeat R] [--smoke] [--json]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common import epoch_phase_cli
from bench.epoch_bench import run_epoch

# mode -> (sampler processes per trainer, extra environment)
MODES: dict[str, tuple[int, dict[str, str]]] = {
    "in the step": (0, {"DGLCTL_PREFETCH": "0"}),
    "prefetch thread": (0, {}),
    "1 sampler": (1, {}),
}


def measure(cfg: Path, work: Path, *, steps: int, repeat: int, batch_size: int = 1000,
            fan_out: str = "10,25") -> dict[str, Any]:
    """Every mode once per round (``repeat`` rounds), in a rotating order; per mode the median epoch, wait
    (``sample``) and step's feature read (``fetch``) seconds, the wait's share, and each
    run's mean loss (the same batches in every mode: the same losses)."""
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    names = list(MODES)
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samplers, env = MODES[name]
            runs[name].append(run_epoch(cfg, work, hosts=2, steps_per_trainer=steps,
                                        batch_size=batch_size, fan_out=fan_out,
                                        num_samplers=samplers, env=env))
    out: dict[str, Any] = {"steps": steps, "rounds": repeat, "modes": {}}
    for name, rs in runs.items():
        epoch = statistics.median(x["epoch_s"] for x in rs)
        wait = statistics.median(x["split"]["sample"] for x in rs)
        out["modes"][name] = {
            "epoch_s": epoch, "wait_s": wait, "fetch_s": statistics.median(
                x["split"]["fetch"] for x in rs),
            "wait_share": wait / epoch, "epochs_s": [x["epoch_s"] for x in rs],
            "losses": [x["loss"] for x in rs],
            "waits_s": [x["split"]["sample"] for x in rs]}
    base = out["modes"]["in the step"]["epoch_s"]
    for m in out["modes"].values():
        m["epoch_vs_step"] = m["epoch_s"] / base
    return out


def report(r: dict[str, Any]) -> str:
    lines = [f"trainer's wait for batches, {r['steps']} steps per trainer, 2 loopback machines,"
             f" median of {r['rounds']} rounds (modes alternating):",
             f"{'mode':<16} {'epoch s':>8} {'wait s':>8} {'wait %':>7} {'fetch s':>8} "
             f"{'epoch vs step':>14}"]
    for name, m in r["modes"].items():
        lines.append(f"{name:<16} {m['epoch_s']:8.2f} {m['wait_s']:8.2f} "
                     f"{100 * m['wait_share']:6.1f}% {m['fetch_s']:8.2f} "
                     f"{m['epoch_vs_step']:13.2f}x")
    return "\n".join(lines)


def main() -> int:
    return epoch_phase_cli(__doc__ or "", "dglctl-prefetch-", measure, report, steps=30)


if __name__ == "__main__":
    sys.exit(main())
