"""Graph data commands: ``generate``, ``partition`` and ``inspect``."""

from __future__ import annotations

import _thread
import concurrent.futures._base as futures_base
import concurrent.futures.thread as futures_thread
import contextlib
import os
import queue
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import click

from ..display import PhaseProgress
from ..errors import EXIT_SIGNAL_BASE, ConfigError, Interrupted

# How long a failed distributed run may take to have its ranks reaped (their leftovers go then).
STOP_WAIT = 10.0
# The signals that stop a partition run cleanly: Ctrl-C, kill / a scheduler, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Code an exception must not land in: thread pool and lock bookkeeping (a worker thread started
# but never registered keeps the process from exiting), context managers' own exits.
_PROTECTED = tuple(m.__file__ for m in (threading, queue, contextlib, futures_base, futures_thread))


def _parse_node_data(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise ConfigError(
                f"--node-data {v!r}: expected NAME=FILE.npy, e.g. --node-data feat=feat.npy"
            )
        out[name] = path
    return out


@click.command()
@click.option("--nodes", "num_nodes", type=int, default=100_000, show_default=True,
              help="Number of nodes (per node type with --hetero).")
@click.option("--avg-degree", type=float, default=20.0, show_default=True,
              help="Average number of directed edges per node (each undirected edge counts twice).")
@click.option("--communities", type=int, default=None,
              help="Planted communities [default: about one per 1000 nodes].")
@click.option("--classes", "num_classes", type=int, default=8, show_default=True,
              help="Number of label classes.")
@click.option("--feat-dim", type=int, default=32, show_default=True, help="Feature width.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--hetero", is_flag=True,
              help="Several node and edge types (written in DGL's chunked format).")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Output: a .npz file, or a folder for --hetero.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output.")
@click.pass_obj
def generate(app, num_nodes, avg_degree, communities, num_classes, feat_dim, seed, hetero, out,
             overwrite) -> None:
    """Generate a graph a GNN can learn from.

    Planted communities, power-law degrees, features informative of the label and
    train/val/test masks; the same seed gives the same graph. Homogeneous graphs are
    written as .npz (the schema docs/partition-format.md describes), heterogeneous ones (--hetero) in DGL's
    chunked format (a folder with metadata.json).
    """
    from partitioner.generate import generate_graph
    from partitioner.readers import write_chunked, write_npz

    display = app.display()
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} already exists", hint="pass --overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    graph = generate_graph(num_nodes, avg_degree=avg_degree, num_communities=communities,
                           num_classes=num_classes, feat_dim=feat_dim, seed=seed, hetero=hetero)
    if hetero:
        if out.exists():
            import shutil

            shutil.rmtree(out) if out.is_dir() else out.unlink()
        write_chunked(graph, out, graph_name=out.name)
    else:
        if out.suffix != ".npz":
            raise ConfigError(f"--out {out}: a homogeneous graph is written as .npz",
                              hint=f"use --out {out.with_suffix('.npz')}")
        write_npz(graph, out)
    display.info(f"generated {graph.total_nodes:,} nodes, {graph.total_edges:,} edges "
                 f"({len(graph.ntypes)} node types) in {time.perf_counter() - t0:.1f}s")
    display.result(str(out))


@click.command()
@click.option("--input", "input_path", type=click.Path(path_type=Path), required=True,
              help="Graph: .npz, a text edge list (also .gz / .zst), a .parquet edge list, a "
                   "scipy.sparse.save_npz matrix, a DGL chunked folder / metadata.json, or an "
                   "OGB dataset folder.")
@click.option("--format", "fmt",
              type=click.Choice(["auto", "npz", "text", "chunked", "ogb", "scipy", "parquet"]),
              default="auto", show_default=True,
              help="Input format [auto: from the suffix; a folder with raw/edge.csv.gz is ogb, "
                   "an .npz with scipy's format/shape arrays is scipy].")
@click.option("--delimiter", default=None,
              help="Text edge lists: field separator [default: detect comma, tab or spaces].")
@click.option("--node-data", multiple=True, metavar="NAME=FILE.npy",
              help="Text, parquet and scipy input: node data from .npy files (repeatable).")
@click.option("--num-nodes", type=int, default=None,
              help="Text and parquet edge lists: node count [default: largest id + 1].")
@click.option("--split", default=None, metavar="NAME",
              help="OGB input: the split folder (split/NAME) for train/val/test masks "
                   "[default: the only one].")
@click.option("--graph-name", default=None, help="Name of the graph [default: input file stem].")
@click.option("--num-parts", type=int, required=True, help="Number of parts (= machines).")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Output folder (gets GRAPH_NAME.json and part0/, part1/, ...).")
@click.option("--method", type=click.Choice(["auto", "metis", "kaminpar", "parmetis", "random"]),
              default="auto", show_default=True,
              help="metis: fewest cut edges, several balance constraints, up to 2^31 adjacency "
                   "entries (~1B undirected edges). kaminpar: 64-bit, faster with many cores at "
                   "a similar cut, balances one weight (nodes and training nodes folded into "
                   "1 + c*train). parmetis: on MPI ranks (--distributed; ParMETIS, or "
                   "PT-Scotch's library, which balances nodes only). random: no locality, "
                   "instant. auto: metis where it fits (32-bit ids, and its worst-case memory "
                   "under --memory-limit), else kaminpar (parmetis with --distributed); says "
                   "which and why.")
@click.option("--assignment", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, metavar="FILE",
              help="Use this node-to-part assignment instead of --method: one part id per "
                   "node in input id order (.npy, or text: one per line), from any "
                   "partitioner or an earlier --save-assignment. The same assignment writes "
                   "the same parts.")
@click.option("--save-assignment", type=click.Path(dir_okay=False, path_type=Path),
              default=None, metavar="FILE",
              help="Write the part of every node (input id order) to FILE once the "
                   "partition is written: .npy for a FILE.npy, else text, one part id per "
                   "line.")
@click.option("--halo-hops", type=click.IntRange(0, 2), default=1, show_default=True,
              help="Hops of non-owned neighbours stored with each part.")
@click.option("--balance-train/--no-balance-train", default=True, show_default=True,
              help="Balance training nodes (node data train_mask) across parts.")
@click.option("--balance-ntypes", default=None, metavar="NAME",
              help="Also balance each distinct value of node data NAME across parts.")
@click.option("--balance-edges", is_flag=True, help="Also balance in-degree (edges) across parts.")
@click.option("--objtype", type=click.Choice(["cut", "vol"]), default="cut", show_default=True,
              help="METIS objective: edge cut or communication volume.")
@click.option("--imbalance", type=float, default=1.03, show_default=True,
              help="Allowed max/mean load per balance constraint.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--trainers-per-machine", type=int, default=1, show_default=True,
              help="Split each part further into this many trainer pieces (stores trainer_id).")
@click.option("--out-edges/--no-out-edges", default=True, show_default=True,
              help="Also store each part's out-edges (grouped by source), which edge_dir='out' "
                   "sampling and out_degrees need; --no-out-edges saves their time and disk.")
@click.option("--overwrite", is_flag=True, help="Replace an existing partition folder.")
@click.option("--memory-limit", "memory_limit", default=None, metavar="SIZE",
              help="Peak memory to plan for, e.g. 20G or 512M [default: what the machine has "
                   "available]. Under it the run hands memory back after each phase and reads "
                   "the input's pages only while it needs them (slower); a graph that cannot "
                   "fit is refused before any work, with the estimate per phase.")
@click.option("--regime", type=click.Choice(["auto", "fast", "lean"]), default="auto",
              show_default=True,
              help="fast: keep memory across phases and overlap them (quickest). lean: hand "
                   "memory back after each phase (smaller peak, slower). auto: fast when its "
                   "estimate fits the memory limit, else lean.")
@click.option("--estimate", is_flag=True,
              help="Read the input's sizes, print the plan (regime, estimated peak memory per "
                   "phase, output size, time) and exit without partitioning.")
@click.option("--distributed", is_flag=True,
              help="Partition on MPI ranks (Open MPI's mpiexec, mpi4py): each rank reads its "
                   "share of an npz or chunked input (its chunk, with one chunk per rank) and "
                   "writes the parts it holds; rank 0 writes the JSON. Same files as one "
                   "machine for the same assignment.")
@click.option("--ranks", type=int, default=None,
              help="With --distributed: ranks on this machine [default: --num-parts].")
@click.option("--cluster", "cluster_path", type=click.Path(exists=True, dir_okay=False,
                                                          path_type=Path), default=None,
              help="With --distributed: one rank per host of this cluster YAML (started over "
                   "SSH with its hosts' settings; a 'local' cluster runs them here).")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --distributed: folder of every rank's output [default: OUT.logs "
                   "beside OUT].")
@click.option("--json", "json_mode", is_flag=True, help="Print the written config as JSON.")
@click.pass_obj
def partition(app, input_path, fmt, delimiter, node_data, num_nodes, split, graph_name, num_parts,
              out, method, assignment, save_assignment, halo_hops, balance_train, balance_ntypes,
              balance_edges, objtype, imbalance, seed, trainers_per_machine, out_edges, overwrite,
              memory_limit, regime, estimate, distributed, ranks, cluster_path, logs,
              json_mode) -> None:
    """Partition a graph into GRAPH_NAME.json plus per-part shards.

    Nodes are relabeled so every part owns one contiguous id range per type (DGL's scheme);
    the JSON keeps DGL's schema and adds checksums, a feature schema and a quality report.
    The folder is written under a temporary name and appears only when complete.
    With --distributed the work runs on MPI ranks (--ranks here, or --cluster's hosts).
    """
    display = app.display(json_mode)
    limit = _memory_limit(memory_limit)
    ctx = click.get_current_context()
    if assignment is not None and (ctx.get_parameter_source("method")
                                   is not click.core.ParameterSource.DEFAULT):
        raise ConfigError(f"give --assignment and --method apart: --assignment {assignment} "
                          f"already says each node's part (--method {method})")
    if not distributed and (ranks is not None or cluster_path is not None or logs is not None
                            or method == "parmetis"):
        given = "--method parmetis" if method == "parmetis" else \
            "--ranks" if ranks is not None else "--cluster" if cluster_path else "--logs"
        raise ConfigError(f"{given} is for a partition on MPI ranks", hint="add --distributed")
    if distributed:
        from partitioner.readers import detect_format

        from .distributed import check_options, run_distributed

        kind = detect_format(input_path) if fmt == "auto" else fmt
        method = check_options(
            {"balance_ntypes": balance_ntypes, "objtype": objtype,
             "memory_limit": memory_limit, "regime": regime, "estimate": estimate,
             "delimiter": delimiter, "node_data": node_data, "num_nodes": num_nodes,
             "split": split},
            fmt=kind, method="random" if assignment is not None else method,
            halo_hops=halo_hops, ranks=ranks, cluster=cluster_path)
        run_distributed(display, input_path=input_path, fmt=kind,
                        graph_name=graph_name or _default_graph_name(input_path),
                        num_parts=num_parts, out=out, method=method, assignment=assignment,
                        save_assignment=save_assignment, halo_hops=halo_hops,
                        balance_train=balance_train, balance_edges=balance_edges,
                        imbalance=imbalance, seed=seed,
                        trainers_per_machine=trainers_per_machine, out_edges=out_edges,
                        overwrite=overwrite, ranks=ranks, cluster_path=cluster_path, logs=logs,
                        timeout=STOP_WAIT)
        return
    if assignment is not None:
        method = "random"  # what the run needs of the graph: no symmetric CSR, no backend
    # Entered before partitioner (and numpy) is imported: the threads they start must inherit
    # the blocked signals (see stopped_by_signals).
    with stopped_by_signals(out) as stop:
        from partitioner.format import check_output_dir
        from partitioner.pipeline import partition_graph
        from partitioner.readers import read_graph
        from partitioner.report import format_report
        from partitioner.spill import SpillFolder

        if not estimate:
            check_output_dir(out, overwrite)  # before reading: a big graph takes a while to load
        progress = PhaseProgress(display, total=5 if method != "random" else 4)
        # What the readers parse, and what they hold in memory, goes to files beside the output
        # when memory is short; the folder is named like the output's temporary one, so a
        # killed run's is removed by the next run into the same folder
        # (format.remove_stale_temps).
        scratch = SpillFolder(out.absolute().parent / f".{out.name}.tmp-{os.getpid()}-input")
        graph = None
        try:
            progress.phase_start("read", str(input_path))
            t0 = time.perf_counter()
            graph = read_graph(
                input_path,
                fmt=None if fmt == "auto" else fmt,
                delimiter=delimiter,
                node_data=_parse_node_data(node_data) or None,
                num_nodes=num_nodes,
                split=split,
                spill=_parse_into(scratch, input_path, fmt, progress, memory_limit=limit,
                                  regime=regime),
            )
            read_seconds = time.perf_counter() - t0
            from partitioner.pipeline import edge_rate

            progress.phase_end("read", read_seconds, edge_rate(graph.total_edges, read_seconds))
            if estimate:
                _print_estimate(display, graph, method=method, out_edges=out_edges,
                                memory_limit=limit, regime=regime)
                return
            name = graph_name or _default_graph_name(input_path)
            graph = _spill_if_short(graph, scratch, progress, method=method,
                                    out_edges=out_edges, memory_limit=limit, regime=regime)
            config = partition_graph(
                graph, name, num_parts, out, method=method, halo_hops=halo_hops,
                balance_train=balance_train, balance_ntypes=balance_ntypes,
                balance_edges=balance_edges, objtype=objtype, imbalance=imbalance, seed=seed,
                trainers_per_machine=trainers_per_machine, out_edges=out_edges,
                overwrite=overwrite, reporter=progress, memory_limit=limit, regime=regime,
                on_written=stop.output_written, assignment=assignment,
                save_assignment=save_assignment,
            )
        finally:
            del graph  # the mappings of the spilled arrays, before their files go
            shutil.rmtree(scratch.path, ignore_errors=True)
    display.result(format_report(config))
    display.result(f"\nwrote {config.file}")
    # The JSON keeps the keys it always had: the config's own, where it was written, the read.
    display.json({k: v for k, v in config.items() if k != "files"}
                 | {"_path": str(config.file), "_dir": str(config.dir),
                    "read_seconds": read_seconds})


def _memory_limit(text: str | None) -> int | None:
    """``--memory-limit`` in bytes (None when not given)."""
    if text is None:
        return None
    from partitioner.memory_plan import parse_size

    try:
        limit = parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"--memory-limit: {exc}") from None
    if limit <= 0:
        raise ConfigError(f"--memory-limit must be more than 0, got {text!r}")
    return limit


# The fast regime's peak per byte of parsed input (about 100 bytes per directed edge, which
# parses into 16): above the memory limit, the run will be lean and the parse goes to disk.
_FAST_PER_PARSED_BYTE = 6


def _parse_into(scratch, input_path, fmt: str, progress, *, memory_limit: int | None,
                regime: str):
    """Where the reader puts the arrays it parses: ``scratch`` (memory-mapped files, a chunk
    at a time in memory) when the run will not be fast, else None (memory)."""
    from partitioner import spill
    from partitioner.format import format_bytes
    from partitioner.memory import available_memory
    from partitioner.readers import parsed_bytes_estimate

    if regime == "fast":
        return None
    parsed = parsed_bytes_estimate(input_path, None if fmt == "auto" else fmt)
    if parsed < spill.STREAM_MIN_BYTES or (
        regime == "auto"
        and _FAST_PER_PARSED_BYTE * parsed < (memory_limit or available_memory())
    ):
        return None
    if not _room_beside(scratch, parsed, progress,
                        f"parsed into memory, about {format_bytes(parsed)}"):
        return None
    progress.note(f"input: parsed a chunk at a time into memory-mapped files in {scratch.path} "
                  f"(about {format_bytes(parsed)}, removed at the end)")
    return scratch


def _room_beside(scratch, nbytes: int, progress, instead: str) -> bool:
    """Whether the disk of ``scratch`` has room for ``nbytes`` of input and the output beside
    it (twice ``nbytes`` free); if not, says so with what happens ``instead``."""
    from partitioner.format import format_bytes, free_disk_beside

    folder, free = free_disk_beside(scratch.path)
    if free is None or nbytes <= free // 2:
        return True  # unknown: a full disk while parsing says so (partitioner.spill)
    progress.note(f"input: {instead} ({folder} has {format_bytes(free)} free)")
    return False


def _spill_if_short(graph, scratch, progress, *, method: str, out_edges: bool,
                    memory_limit: int | None, regime: str):
    """``graph``, or its copy with the arrays a reader holds in memory moved to memory-mapped
    files in ``scratch`` (partitioner.spill) when the run will not take the fast regime: the
    lean one then reads them only while a phase needs them, as an npz input."""
    from partitioner import spill
    from partitioner.format import format_bytes
    from partitioner.memory_plan import GraphShape, PartitionMemoryError, plan_partition

    held = spill.heap_bytes(graph)
    if held < spill.STREAM_MIN_BYTES or regime == "fast":
        return graph
    try:
        lean = plan_partition(GraphShape.of(graph), method=method, out_edges=out_edges,
                              memory_limit=memory_limit, regime=regime).lean
    except PartitionMemoryError:
        lean = True  # mapped, the input may fit: the run's own plan says
    if not lean:
        return graph
    if not _room_beside(scratch, held, progress,
                        f"{format_bytes(held)} held in memory stays there"):
        return graph
    t0 = time.perf_counter()
    spilled = spill.spill_input(graph, scratch)
    progress.note(f"input: {format_bytes(held)} held in memory moved to memory-mapped files "
                  f"in {time.perf_counter() - t0:.1f}s ({scratch.path}, removed at the end)")
    return spilled


def _print_estimate(display, graph, *, method: str, out_edges: bool,
                    memory_limit: int | None, regime: str) -> None:
    """``partition --estimate``: both regimes' estimates per phase, and the one a run takes."""
    from partitioner.format import format_bytes
    from partitioner.memory_plan import (
        PHASES,
        GraphShape,
        PartitionMemoryError,
        phase_estimates,
        plan_partition,
    )

    shape = GraphShape.of(graph)
    try:
        plan = plan_partition(shape, method=method, out_edges=out_edges,
                              memory_limit=memory_limit, regime=regime)
        error = None
    except PartitionMemoryError as exc:
        plan, error = None, exc
    likely = plan.method if plan is not None else method
    regimes = {lean: phase_estimates(shape, lean=lean, method=likely, out_edges=out_edges)
               for lean in (False, True)}
    lines = [f"{shape.nodes:,} nodes, {shape.edges:,} directed edges, input "
             f"{format_bytes(shape.input_bytes)} ({format_bytes(shape.mapped_bytes)} "
             f"memory-mapped)",
             f"{'phase':<12}{'fast':>12}{'lean':>12}"]
    for phase in PHASES:
        lines.append(f"{phase:<12}{format_bytes(regimes[False][phase]):>12}"
                     f"{format_bytes(regimes[True][phase]):>12}")
    lines.append(f"{'peak':<12}{format_bytes(max(regimes[False].values())):>12}"
                 f"{format_bytes(max(regimes[True].values())):>12}")
    if plan is not None:
        if method == "auto":
            lines.append(f"method auto: likely {plan.method}"
                         + (f" ({plan.method_reason})" if plan.method_reason else ""))
        lines.append(plan.summary())
    display.result("\n".join(lines))
    display.json(plan.to_json() if plan is not None else
                 {"regime": None, "error": str(error),
                  "fast_peak_bytes": max(regimes[False].values()),
                  "lean_peak_bytes": max(regimes[True].values()),
                  "phases": {"fast": regimes[False], "lean": regimes[True]}})
    if error is not None:
        raise error


class _SignalStop:
    """The state of one :func:`stopped_by_signals` block."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.fired: int | None = None  # the signal that raised Interrupted
        self.done = threading.Event()  # the block has ended
        self.late: int | None = None  # a signal that came as it ended
        self.deferred: int | None = None  # a signal to raise once out of protected code

    def output_written(self) -> None:
        """The output is in place: from now on a signal no longer raises Interrupted ("nothing
        was written") but ends the process once the block is over, by the old handler."""
        self.done.set()

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """In the main thread: the first signal raises Interrupted, unless ``frame`` is in
        protected code (the watcher then tries again shortly); a later one (the cleanup is
        stuck) ends the process at once. Once the block has ended (the output is complete)
        the signal is kept for the old handler instead."""
        if self.done.is_set():
            self.late = signum
            return
        if self.fired is not None:
            os._exit(EXIT_SIGNAL_BASE + signum)
        if _in_protected_code(frame):
            self.deferred = signum
            return
        self.deferred = None
        self.fired = signum
        raise Interrupted(
            f"partition stopped by {signal.Signals(signum).name}; nothing was written to "
            f"{self.out}",
            hint="run the command again: an interrupted run leaves no partial output",
            signum=signum,
        )

    def watch(self) -> None:
        """Take the blocked signals off the process and run :meth:`handler` in the main
        thread for the first (at its next Python instruction: after a C call returns)."""
        seen = 0
        while not self.done.is_set():
            info = signal.sigtimedwait(STOP_SIGNALS, 0.1 if self.deferred is None else 0.005)
            if info is None:
                if self.deferred is not None:
                    _thread.interrupt_main(signal.Signals(self.deferred))
                continue
            if self.done.is_set():
                self.late = info.si_signo
                continue
            seen += 1
            if seen > 1:
                os._exit(EXIT_SIGNAL_BASE + info.si_signo)
            _thread.interrupt_main(signal.Signals(info.si_signo))


def _in_protected_code(frame: FrameType | None) -> bool:
    """Whether ``frame`` or a caller of it runs code of :data:`_PROTECTED`."""
    while frame is not None:
        if frame.f_code.co_filename in _PROTECTED:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def stopped_by_signals(out: Path) -> Iterator[_SignalStop]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP raise Interrupted (exit 128 + N).

    The exception unwinds the partitioner, whose atomic output removes its temporary
    ``.OUT.tmp-PID`` folder on the way out. A second signal stops the process at once (exit
    128 + N); the next run into the same parent removes what it left.

    No C code may see these signals: METIS (GKlib) traps SIGTERM while it runs and, on one,
    fails or jumps across threads. So they are blocked in this thread, and so in every thread
    started inside the block (numpy's, the partitioner's pool: enter it before importing
    them), and a watcher thread takes them with ``sigtimedwait`` and has the main thread raise
    at its next Python instruction, though never inside thread-pool or context-manager code
    (:data:`_PROTECTED`): there it waits until that code returns. Yields the block's state:
    call its ``output_written`` the moment the output is complete (a signal after that, or
    one still waiting on protected code then, ends the process by the old handler once the
    block is over). Outside the main thread, or without ``sigtimedwait``, nothing is
    installed.
    """
    stop = _SignalStop(out)
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "sigtimedwait"
    ):
        yield stop
        return
    previous = {s: signal.signal(s, stop.handler) for s in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    watcher = threading.Thread(target=stop.watch, name="dglctl-signals", daemon=True)
    watcher.start()
    try:
        yield stop
    except BaseException:
        # The Interrupted, or another error, ends the block and the process with its message.
        stop.fired = stop.deferred = None
        raise
    finally:
        stop.done.set()
        watcher.join()
        # A signal is never lost: one that waited on protected code until the block ended,
        # or whose Interrupted some code swallowed, ends the process once the block is over.
        if stop.late is None:
            stop.late = stop.deferred if stop.deferred is not None else stop.fired
        # Handlers first: a signal still pending when the mask goes meets the old handler,
        # as does one that came as the block ended.
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if stop.late is not None:
            os.kill(os.getpid(), stop.late)


def _default_graph_name(path: Path) -> str:
    from partitioner.readers.compressed import strip_compression_suffix

    # edges.txt.gz is named "edges", as edges.txt is.
    stem = path.name if path.is_dir() else Path(strip_compression_suffix(path.name)).stem
    if stem == "metadata":
        stem = path.parent.name
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
    return cleaned or "graph"


@click.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Check every file's size and checksum.")
@click.option("--json", "json_mode", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def inspect(app, config, verify, json_mode) -> None:
    """Verify a partition folder against its checksums and print its quality report.

    CONFIG is the partition's JSON file or the folder holding it. Exits non-zero if any
    file is missing, has the wrong size or fails its checksum.
    """
    from partitioner.format import checksum_error, read_config, verify_files
    from partitioner.report import format_report

    display = app.display(json_mode)
    cfg = read_config(config)
    problems = verify_files(cfg) if verify else []
    display.result(format_report(cfg))
    if verify:
        display.result(
            f"\nfiles: {len(cfg.files)} checked, "
            + ("all match" if not problems else f"{len(problems)} FAILED")
        )
    display.json({"config": str(cfg.file), "verified": verify, "problems": problems,
                  "quality": cfg.quality})
    if problems:
        raise checksum_error(cfg, problems)


COMMANDS = [generate, partition, inspect]
