"""``dglctl partition --distributed``: the partition made on MPI ranks (``dglctl.jobs.mpi``),
each rank reading its share of the input and writing the parts it holds."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..display import PhaseProgress
from ..errors import ConfigError, Interrupted

if TYPE_CHECKING:
    from ..hosts.agent_client import PreflightReport

# What a distributed run reads a share of (each rank touches its rows or its chunks only).
FORMATS = ("npz", "chunked")
METHODS = ("parmetis", "random")
# The single-machine options a distributed run does not take, with their defaults.
SINGLE_MACHINE_ONLY = {"balance_ntypes": None, "objtype": "cut",
                       "memory_limit": None, "regime": "auto", "estimate": False,
                       "delimiter": None, "node_data": (), "num_nodes": None, "split": None}


class _Stop(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP raise in the main thread (the run stops its ranks)."""
    def handler(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        raise _Stop(signum)

    previous = {s: signal.signal(s, handler)
                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def check_options(given: dict[str, Any], *, fmt: str, method: str, halo_hops: int,
                  ranks: int | None, cluster: Path | None) -> str:
    """Refuse what a distributed run cannot do, naming the option; returns the method."""
    extra = [name for name, default in SINGLE_MACHINE_ONLY.items() if given[name] != default]
    if extra:
        names = ", ".join("--" + n.replace("_", "-") for n in extra)
        raise ConfigError(f"--distributed does not take {names}",
                          hint="give them without --distributed (one machine)")
    if fmt not in FORMATS:
        raise ConfigError(f"--distributed reads npz or chunked input (each rank reads its "
                          f"share of those), not {fmt}",
                          hint="convert the graph on one machine first, e.g. with "
                               "partitioner.readers.write_chunked")
    method = "parmetis" if method == "auto" else method
    if method not in METHODS:
        raise ConfigError(f"--distributed partitions with parmetis or random, not {method}")
    if halo_hops > 1:
        raise ConfigError(f"--distributed writes halos of 0 or 1 hop, not {halo_hops}")
    if ranks is not None and cluster is not None:
        raise ConfigError("give --ranks or --cluster: a cluster runs one rank per host")
    if ranks is not None and ranks < 1:
        raise ConfigError(f"--ranks must be at least 1, got {ranks}")
    return method


def _input_bytes(path: Path) -> int:
    """The input's size on disk (a chunked folder: all its files)."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def preflight(cluster: Any, *, method: str, need: int) -> None:
    """Ask every host of ``cluster`` over its transport whether a rank can run there: the
    same Python and dglctl as here, mpi4py (and, for parmetis, the ParMETIS library)
    loading, and free disk for its share of the output (about twice its share of the input,
    ``need`` bytes in all). An unreachable host is one GroupError naming it; every problem
    found is one PreflightError."""
    from ..errors import PreflightError
    from ..hosts.agent_client import AgentClient
    from ..hosts.group import fan_out
    from ..hosts.transports import make_transport
    from ..jobs import preflight as pf

    transports = [make_transport(h, cluster) for h in cluster.hosts]
    clients = [AgentClient(t) for t in transports]
    try:
        reports = fan_out(clients, lambda i, c: c.preflight(c.host.data_address, [], mpi=True))
    finally:
        for t in transports:
            t.close()
    share = 2 * need // max(1, len(cluster.hosts))
    problems: list[str] = []
    libraries = False
    for h, r in zip(cluster.hosts, reports, strict=True):
        found = pf.host_problems(h, r, share, lambda: share)
        found.pop("address", None)  # MPI takes its own addresses
        problems += found.values()
        missing = _library_problem(f"host {h.name}", r, method)
        if missing is not None:
            problems.append(missing)
            libraries = True
    if problems:
        from ..jobs.mpi import INSTALL_HINT

        raise PreflightError(problems, hint=INSTALL_HINT if libraries else None)


def _library_problem(where: str, r: PreflightReport, method: str) -> str | None:
    """What a rank started with ``r.executable`` lacks, by the agent's report ``r``: mpi4py
    (with its MPI library), or for ``parmetis`` the ParMETIS library; None if nothing."""
    if r.mpi_error is not None:
        return (f"{where}: mpi4py does not load with {r.executable}: {r.mpi_error} "
                "(pip install 'dglctl[mpi]' into that Python)")
    if method == "parmetis" and r.parmetis_error is not None:
        return f"{where}: {r.parmetis_error} (--method random needs no library)"
    return None


def preflight_here(*, method: str, timeout: float) -> None:
    """Whether ranks can run on this machine (``--ranks``, or a ``local`` cluster): the check
    an SSH host's agent makes, here, with this interpreter (the one mpiexec starts the ranks
    with): mpi4py and its MPI library load in a child of it, and for ``parmetis`` the
    ParMETIS library. A missing one is one PreflightError naming it and what to install,
    before mpiexec starts (not a traceback from every rank)."""
    from ..errors import PreflightError
    from ..hosts.agent_client import AgentClient
    from ..hosts.transports import make_transport
    from ..jobs.mpi import INSTALL_HINT
    from ..jobs.mpi_job import this_machine

    cluster = this_machine(timeout)
    transport = make_transport(cluster.hosts[0], cluster)
    try:  # the workspace is the one the partition's job then runs in
        report = AgentClient(transport).preflight(cluster.hosts[0].data_address, [], mpi=True)
    finally:
        transport.close()
    missing = _library_problem("this machine", report, method)
    if missing is not None:
        raise PreflightError([missing], hint=INSTALL_HINT)


def run_distributed(display: Any, *, input_path: Path, fmt: str, graph_name: str,
                    num_parts: int, out: Path, method: str, assignment: Path | None,
                    save_assignment: Path | None, halo_hops: int, balance_train: bool,
                    balance_edges: bool, imbalance: float, seed: int,
                    trainers_per_machine: int, out_edges: bool, overwrite: bool, ranks: int | None, cluster_path: Path | None,
                    logs: Path | None, timeout: float) -> None:
    """Run the ranks, show rank 0's phases, and print the report of what they wrote."""
    import sys

    from partitioner.format import check_output_dir, read_config
    from partitioner.report import format_report

    from ..jobs import mpi

    out = out.absolute()
    check_output_dir(out, overwrite)  # before starting any rank
    rank_args = ["--input", str(input_path.absolute()), "--format", fmt, "--out", str(out),
                 "--graph-name", graph_name, "--num-parts", str(num_parts), "--method", method,
                 "--halo-hops", str(halo_hops), "--trainers-per-machine",
                 str(trainers_per_machine), "--seed", str(seed), "--imbalance", str(imbalance),
                 "--progress", "json"]
    if assignment is not None:
        rank_args += ["--assignment", str(assignment.absolute())]
    if save_assignment is not None:
        rank_args += ["--save-assignment", str(save_assignment.absolute())]
    for flag, on in (("--no-balance-train", not balance_train), ("--balance-edges", balance_edges),
                     ("--no-out-edges", not out_edges),
                     ("--overwrite", overwrite)):
        if on:
            rank_args.append(flag)
    logs = (logs or out.parent / f"{out.name}.logs").absolute()
    if cluster_path is not None:
        from ..config import load_cluster_config

        cluster = load_cluster_config(cluster_path)
        if cluster.transport == "slurm":
            raise ConfigError(f"{cluster_path}: partition --distributed does not run its "
                              "ranks as Slurm job steps yet (transport slurm)",
                              hint="inside the allocation, run it on one node with --ranks "
                                   "N, or give an SSH cluster file of the nodes")
        # Before the logs folder: a host that fails preflight leaves nothing behind.
        if cluster.transport != "local":
            preflight(cluster, method=method, need=_input_bytes(input_path))
        else:  # every rank runs here, with this interpreter
            preflight_here(method=method, timeout=timeout)
        logs.mkdir(parents=True, exist_ok=True)
        argv = mpi.cluster_command(cluster, rank_args, logs, sys.executable)
        where = f"{len(cluster.hosts)} hosts of {cluster_path}"
    else:
        count = ranks or num_parts
        preflight_here(method=method, timeout=timeout)
        argv = mpi.local_command(count, rank_args, python=sys.executable)  # finds mpiexec
        logs.mkdir(parents=True, exist_ok=True)
        where = f"{count} ranks on this machine"
    progress = PhaseProgress(display, total=6 if out_edges else 5)
    progress.note(f"partitioning on {where} (mpiexec; every rank's output in {logs})")

    def shown(doc: dict[str, Any]) -> None:
        if "note" in doc:
            progress.note(str(doc["note"]))
        elif "seconds" in doc:
            progress.phase_end(str(doc["phase"]), float(doc["seconds"]))
        elif "phase" in doc:
            progress.phase_start(str(doc["phase"]), str(doc.get("detail", "")))

    from ..jobs.manifest import JobState
    from ..jobs.mpi_job import MpiJob

    before = _identity(out)  # the ranks' commit puts a new folder there
    job = MpiJob(argv, script="dglctl partition --distributed",
                 args=[str(input_path), "--num-parts", str(num_parts), "--out", str(out)],
                 part_config=out / f"{graph_name}.json", timeout=timeout)
    output = mpi.RankOutput(logs, on_line=shown)
    try:
        with _signals_raise():
            job.start()
            progress.note(f"job {job.job_id} ('dglctl status {job.job_id}', 'dglctl logs "
                          f"{job.job_id}', 'dglctl stop {job.job_id}')")
            code, stopped = job.follow(output.feed)
    except _Stop as stop:
        output.close()
        job.stop()
        name = signal.Signals(stop.signum).name
        mpi.remove_leftovers(out, timeout)
        if _identity(out) != before:  # the ranks had put the partition in place
            job.record_end(JobState.SUCCEEDED, f"{name} came after the ranks had written "
                           f"{out}", over_stop=True)
            raise Interrupted(f"stopped by {name}, but the ranks had already written {out}: "
                              f"the partition is complete", signum=stop.signum) from None
        job.record_end(JobState.STOPPED, f"stopped by {name}")
        raise Interrupted(f"stopped by {name}: every rank ended, nothing written to {out}",
                          signum=stop.signum) from None
    finally:
        job.close()
    run = output.finish(code)
    if stopped:
        mpi.remove_leftovers(out, timeout)
        if _identity(out) == before:
            raise Interrupted(f"job {job.job_id} was stopped by 'dglctl stop': every rank "
                              f"ended, nothing written to {out}", signum=signal.SIGTERM)
        # The stop came between the ranks' commit and mpiexec's end: the partition is whole.
        job.record_end(JobState.SUCCEEDED, "'dglctl stop' came after the ranks had written "
                       f"{out}", over_stop=True)
        progress.note(f"job {job.job_id} was stopped by 'dglctl stop' after the ranks had "
                     f"written {out}: the partition is complete")
    elif run.returncode != 0 or run.result is None:
        error = mpi.failure(run, logs)
        job.record_end(JobState.FAILED, error.message)
        mpi.remove_leftovers(out, timeout)
        raise error
    else:
        job.record_end(JobState.SUCCEEDED, None)
    config = read_config(out / f"{graph_name}.json")
    display.result(format_report(config))
    display.result(f"\nwrote {config.file} on {config['quality'].get('ranks')} ranks")
    display.json({k: v for k, v in config.items() if k != "files"}
                 | {"_path": str(config.file), "_dir": str(config.dir), "_logs": str(logs),
                    "_job": job.job_id})


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, None where nothing is: a run's commit (a rename of
    its temporary folder into place) changes it, so a stop can tell whether it came after."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
