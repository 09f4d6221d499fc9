"""One rank of a distributed partition: ``mpiexec -n R python -m partitioner.distributed
--input IN --out OUT --num-parts N [...]``.

Every rank reads the same input lazily (a rank touches only its share) and calls
:func:`partitioner.distributed.partition_distributed`. Rank 0 prints one JSON line with the
written config's path and quality report. An error on any rank is printed as one JSON line
on stderr (``{"error": ..., "hint": ..., "rank": R, "host": H, "time": T, "consequence": ...}``,
:mod:`.failure`) and the whole job is aborted (``MPI_Abort``), so no rank waits for it: mpiexec
then exits non-zero and the output folder is never put in place. The temporary folder the ranks
wrote into stays until every rank has ended; ``dglctl partition`` removes it then, and a later
run removes what a dead run left.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from ..errors import PartitionerError
from .failure import failure_record


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m partitioner.distributed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="graph input (npz, chunked, ...)")
    p.add_argument("--format", default=None, help="input format (default: from the path)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--graph-name", default="graph")
    p.add_argument("--num-parts", type=int, required=True)
    p.add_argument("--method", default="parmetis", choices=("parmetis", "random"))
    p.add_argument("--assignment", default=None, help="node-to-part file used as is")
    p.add_argument("--save-assignment", default=None)
    p.add_argument("--halo-hops", type=int, default=1)
    p.add_argument("--trainers-per-machine", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--imbalance", type=float, default=1.03)
    p.add_argument("--no-balance-train", action="store_true")
    p.add_argument("--balance-edges", action="store_true", help="also balance in-degree")
    p.add_argument("--no-out-edges", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--budget-mb", type=float, default=64.0,
                   help="bytes one rank sends per message round, in MiB")
    p.add_argument("--progress", choices=("text", "json"), default=None,
                   help="rank 0 prints phases on stderr: as text, or one JSON object a line")
    return p


class _StderrPhases:
    """Rank 0's phases on stderr, as text or as JSON lines (``{"phase", "detail"}`` at a
    start, ``{"phase", "seconds"}`` at an end, ``{"note"}``) for ``dglctl partition``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def _say(self, text: str, doc: dict[str, Any]) -> None:
        line = json.dumps(doc) if self.as_json else f"[{time.strftime('%H:%M:%S')}] {text}"
        sys.stderr.write(line + "\n")  # one write: mpiexec tags what each write gives it
        sys.stderr.flush()

    def phase_start(self, name: str, detail: str) -> None:
        self._say(f"{name}: {detail}", {"phase": name, "detail": detail})

    def phase_end(self, name: str, seconds: float, rate: str = "") -> None:
        self._say(f"{name} done in {seconds:.2f}s", {"phase": name, "seconds": seconds})

    def note(self, text: str) -> None:
        self._say(text, {"note": text})


def main(argv: list[str] | None = None) -> int:
    """Run one rank; returns its exit code (or aborts every rank on an error)."""
    args = _parser().parse_args(argv)
    from mpi4py import MPI

    from ..readers import detect_format, read_graph
    from ..readers.chunked import chunked_layout, open_chunked
    from .pipeline import partition_distributed

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        chunks: dict[str, Any] = {}
        if (args.format or detect_format(args.input)) == "chunked":
            # Each rank reads the chunks its share overlaps (its own, with a chunk per rank).
            layout = chunked_layout(args.input)
            graph = open_chunked(layout)
            chunks = {"node_chunks": layout.node_chunks,
                      "edge_chunks": [sizes for _, _, sizes in layout.edges]}
        else:  # npz is memory-mapped: a rank touches its rows only
            graph = read_graph(args.input, fmt=args.format)
        config: dict[str, Any] | None = partition_distributed(
            comm, graph, args.graph_name, args.num_parts, args.out, method=args.method,
            assignment=args.assignment, halo_hops=args.halo_hops,
            balance_train=not args.no_balance_train, balance_edges=args.balance_edges,
            imbalance=args.imbalance, seed=args.seed,
            trainers_per_machine=args.trainers_per_machine, out_edges=not args.no_out_edges,
            overwrite=args.overwrite, save_assignment=args.save_assignment,
            reporter=_StderrPhases(args.progress == "json") if args.progress else None,
            budget=int(args.budget_mb * 2**20), **chunks)
    except BaseException as exc:  # noqa: BLE001 - every failure ends every rank
        line = json.dumps(failure_record(exc, rank, args.out))
        sys.stderr.flush()
        os.write(2, (line + "\n").encode())  # one write: lines of ranks do not interleave
        # The abort ends every rank where it is, the temporary output left as it is: removing
        # it here would pull it from under ranks still writing (the launcher, or the next
        # run, removes it once every rank has ended).
        comm.Abort(getattr(exc, "exit_code", 1) if isinstance(exc, PartitionerError) else 1)
        return 1
    if rank == 0 and config is not None:
        print(json.dumps({"config": str(args.out) + f"/{args.graph_name}.json",
                          "quality": config["quality"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
