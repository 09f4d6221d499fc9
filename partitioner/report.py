"""The partition quality report: edge cut, per-part sizes and balance, phase times, peak memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from .format import PartConfig
from .graph import Graph


def _balance(values: list[int]) -> float:
    mean = float(np.mean(values)) if values else 0.0
    return round(max(values) / mean, 4) if mean > 0 else 1.0


def quality_report(
    graph: Graph,
    part: np.ndarray,
    part_stats: list[Any],
    times: dict[str, float],
    peak_bytes: int,
) -> dict[str, Any]:
    """Build the report stored under ``quality`` in the part config.

    The edge cut counts directed edges whose endpoints lie in different parts.
    """
    offsets = graph.node_offsets()
    train = np.zeros(len(part_stats), np.int64)
    for t, ntype in enumerate(graph.ntypes):
        mask = graph.ndata.get(ntype, {}).get("train_mask")
        if mask is not None:
            train += np.bincount(
                part[offsets[t] : offsets[t + 1]][mask.astype(bool)], minlength=len(part_stats)
            )
    return report_from_counts(part_stats, train, graph.total_edges, times, peak_bytes)


def report_from_counts(
    part_stats: list[Any], train: np.ndarray, total_edges: int, times: dict[str, float],
    peak_bytes: int,
) -> dict[str, Any]:
    """The report from each part's counts and training nodes (what a distributed run has:
    no rank holds the whole graph)."""
    cut = sum(s.cut_edges for s in part_stats)
    num_parts = len(part_stats)
    nodes = [s.num_nodes for s in part_stats]
    edges = [s.num_edges for s in part_stats]
    halo = [int(sum(s.num_halo)) for s in part_stats]
    return {
        "edge_cut": cut,
        "edge_cut_pct": round(100.0 * cut / total_edges, 3) if total_edges else 0.0,
        "parts": [
            {"part": p, "nodes": nodes[p], "edges": edges[p], "train_nodes": int(train[p]),
             "halo_nodes": halo[p]}
            for p in range(num_parts)
        ],
        "balance": {
            "nodes": _balance(nodes),
            "edges": _balance(edges),
            "train_nodes": _balance(train.tolist()),
            "halo_nodes": _balance(halo),
        },
        "phase_seconds": {k: round(v, 3) for k, v in times.items()},
        "total_seconds": round(sum(times.values()), 3),
        "peak_memory_bytes": int(peak_bytes),
    }


def format_report(config: PartConfig) -> str:
    """Render a config's quality report as a plain-text table for people."""
    q = config.quality
    if not q:
        return f"{config.graph_name}: no quality report stored"
    lines = [
        f"graph {config.graph_name}: {config['num_nodes']:,} nodes, {config['num_edges']:,} "
        f"edges, {config.num_parts} parts ({config['part_method']}, halo {config.halo_hops})",
        f"edge cut: {q['edge_cut']:,} edges ({q['edge_cut_pct']}%)",
        "",
        f"{'part':>4}  {'nodes':>12}  {'edges':>12}  {'train':>10}  {'halo':>10}",
    ]
    for row in q["parts"]:
        lines.append(
            f"{row['part']:>4}  {row['nodes']:>12,}  {row['edges']:>12,}  "
            f"{row['train_nodes']:>10,}  {row['halo_nodes']:>10,}"
        )
    b = q["balance"]
    lines.append(
        f"{'max/mean':>4}  {b['nodes']:>12}  {b['edges']:>12}  {b['train_nodes']:>10}  "
        f"{b['halo_nodes']:>10}"
    )
    times = ", ".join(f"{k} {v:.2f}s" for k, v in q["phase_seconds"].items())
    lines += ["", f"time: {q['total_seconds']:.2f}s ({times})",
              f"peak memory: {q['peak_memory_bytes'] / 2**30:.2f} GiB"]
    return "\n".join(lines)
