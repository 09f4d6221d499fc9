"""GPU trainers against CPU trainers in the same run (issue 24): the GraphSAGE example's epoch.

bench/epoch_bench.py's set-up (a generated community graph, 2 loopback machines, one server
and one trainer each, GraphSAGE [10, 25] hidden 64, batch 1000), run alternately with CPU
trainers and with trainers on the machine's GPU (``--device cuda``: the loaders copy each
batch through pinned memory on a side stream, the model trains on the GPU). Both trainers of
the emulated hosts share this machine's GPU (the launcher's round robin), so DDP keeps gloo
(``DGLCTL_SHARED_GPU=1``: NCCL refuses two ranks on one device). Prints each epoch with its
split (sampling wait, feature fetch, forward, backward, all-reduce; for the GPU the loader's
host time copying batches to it, ``copy``, overlapped on its prefetch thread) and the GPU/CPU
ratio of the best of ``--repeat`` each. Each kind runs again with a feature cache
(``--feature-cache-gb``, default 0.02 GB: a sixth of the other machine's rows at 1M nodes):
its hit rate and its fetch time against the same kind's without.

Without a CUDA device it says so and exits 0 after the CPU epochs (``--smoke``: a check of
the script on 20k nodes, not a figure). With ``--json`` the JSON alone goes to stdout.

    python -m bench.gpu_epoch [--nodes N] [--steps S] [--repeat R] [--feature-cache-gb G]
                              [--smoke] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import prepare_parts
from bench.epoch_bench import run_epoch

CACHE_HITS = re.compile(r"feature cache hits ([0-9.]+)% of (\d+) remote rows")


def measure(cfg: Path, work: Path, *, steps: int, repeat: int, batch: int,
            gpu: bool, cache_gb: float = 0.0) -> dict[str, Any]:
    """Best-of-``repeat`` epochs of each kind, alternating (CPU first); the GPU kinds only
    with ``gpu``; each kind also with a feature cache of ``cache_gb`` (``*_cache``) when it
    is above 0."""
    kinds: dict[str, tuple[list[str], dict[str, str]]] = {"cpu": ([], {})}
    if gpu:
        kinds["gpu"] = (["--device", "cuda"], {"DGLCTL_DEVICE": "cuda:0",
                                               "DGLCTL_SHARED_GPU": "1"})
    if cache_gb > 0:
        for kind, (args, env) in list(kinds.items()):
            kinds[f"{kind}_cache"] = (args, {**env, "DGLCTL_FEATURE_CACHE_GB": str(cache_gb)})
    best: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):
        for kind, (args, env) in kinds.items():
            r = run_epoch(cfg, work, hosts=2, steps_per_trainer=steps, batch_size=batch,
                          extra_args=args, env=env)
            if kind not in best or r["epoch_s"] < best[kind]["epoch_s"]:
                best[kind] = r
    out: dict[str, Any] = {k: {"epoch_s": v["epoch_s"], "split": v["split"], "line": v["line"]}
                           for k, v in best.items()}
    if "gpu" in best:
        out["gpu_over_cpu"] = best["gpu"]["epoch_s"] / best["cpu"]["epoch_s"]
    for kind in [k for k in best if k.endswith("_cache")]:
        m = CACHE_HITS.search(best[kind]["line"])
        out[kind]["hit_rate"] = float(m[1]) / 100 if m else None
        base = best[kind.removesuffix("_cache")]["split"].get("fetch")
        fetch = best[kind]["split"].get("fetch")
        out[f"{kind}_fetch_ratio"] = fetch / base if fetch is not None and base else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=50, help="steps per trainer")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--feature-cache-gb", type=float, default=0.02,
                    help="each kind again with this feature cache (0: none)")
    ap.add_argument("--smoke", action="store_true", help="20k nodes, 5 steps of batch 200")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    from partitioner.generate import generate_graph

    nodes, steps, batch, repeat = args.nodes, args.steps, 1000, args.repeat
    if args.smoke:
        nodes, steps, batch, repeat = 20_000, 5, 200, 1
    gpu = torch.cuda.is_available()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-gpu-epoch-"))
    cfg = prepare_parts(lambda: generate_graph(nodes, avg_degree=20.0, seed=0), work, (2,))[2]
    r = measure(cfg, work, steps=steps, repeat=repeat, batch=batch, gpu=gpu,
                cache_gb=args.feature_cache_gb)
    r.update(nodes=nodes, steps=steps, batch=batch, repeat=repeat, cuda=gpu,
             device=torch.cuda.get_device_name(0) if gpu else None)
    out = sys.stderr if args.json else sys.stdout  # --json: the JSON alone on stdout
    for kind in ("cpu", "cpu_cache", "gpu", "gpu_cache"):
        if kind in r:
            print(f"{kind}: {r[kind]['line']}", file=out)
    for kind in ("cpu_cache", "gpu_cache"):
        if r.get(f"{kind}_fetch_ratio") is not None:
            print(f"{kind}: fetch with the cache / without: {r[f'{kind}_fetch_ratio']:.2f}x "
                  f"(hit rate {r[kind]['hit_rate'] or 0:.1%}, {args.feature_cache_gb:g} GB)",
                  file=out)
    if gpu:
        print(f"GPU epoch / CPU epoch: {r['gpu_over_cpu']:.2f}x (best of {repeat} each, "
              "alternating)", file=out)
    else:
        print("no CUDA device here (torch.cuda.is_available() is False): CPU epochs only",
              file=out)
    if args.json:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
