"""Time DGL 1.1.3's 2-layer block sampling on an .npz graph (run with the DGL venv's python)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")  # else 'import dgl' writes ~/.dgl/config.json

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def load_graph(path: str) -> dgl.DGLGraph:
    """The graph of an .npz with ``src``, ``dst`` and ``num_nodes`` (COO), CSC built up front."""
    with np.load(path, allow_pickle=False) as archive:
        src = torch.from_numpy(np.ascontiguousarray(archive["src"], dtype=np.int64))
        dst = torch.from_numpy(np.ascontiguousarray(archive["dst"], dtype=np.int64))
        if "num_nodes" in archive.files:
            num_nodes = int(archive["num_nodes"])
        else:
            num_nodes = int(max(src.max(), dst.max())) + 1
    g = dgl.graph((src, dst), num_nodes=num_nodes).formats("csc")
    g.create_formats_()
    return g


def sample_once(sampler: dgl.dataloading.NeighborSampler, g: dgl.DGLGraph,
                seeds: torch.Tensor) -> tuple[float, int]:
    """One ``sample_blocks`` call: (milliseconds, edges in all blocks)."""
    t0 = time.perf_counter()
    # DGL 1.x: sample_blocks(g, seeds) -> (input_nodes, output_nodes, blocks).
    _, _, blocks = sampler.sample_blocks(g, seeds)
    ms = (time.perf_counter() - t0) * 1e3
    return ms, sum(int(b.num_edges()) for b in blocks)


def measure(sampler: dgl.dataloading.NeighborSampler, g: dgl.DGLGraph, seeds: torch.Tensor,
            repeat: int) -> dict[str, float | int | list[float]]:
    """Median time and edges of ``repeat`` calls."""
    runs = [sample_once(sampler, g, seeds) for _ in range(repeat)]
    times = [ms for ms, _ in runs]
    return {"ms": float(np.median(times)), "edges": int(np.median([e for _, e in runs])),
            "times_ms": times}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("graph", help=".npz with src, dst, num_nodes")
    ap.add_argument("seeds", help=".npy of seed node ids (ids of the .npz)")
    ap.add_argument("--fanouts", default="10,25", help="per layer, input layer first")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--serve", action="store_true",
                    help="after loading, read a repeat count per stdin line and answer one JSON "
                         "line each (lets a caller interleave its own measurements)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    g = load_graph(args.graph)
    seeds = torch.from_numpy(np.load(args.seeds).astype(np.int64))
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fanouts.split(",")])
    sample_once(sampler, g, seeds)  # warm-up
    info = {"dgl": dgl.__version__, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "load_s": time.perf_counter() - t0,
            "nodes": g.num_nodes(), "graph_edges": g.num_edges()}
    if not args.serve:
        print(json.dumps({**measure(sampler, g, seeds, args.repeat), **info}), flush=True)
        return 0
    print(json.dumps({"ready": True, **info}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(measure(sampler, g, seeds, int(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
