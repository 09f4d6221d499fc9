"""A partition on MPI ranks (``dglctl partition --distributed``): the mpiexec command line for
ranks on this machine or on a cluster's hosts, and what its output says: rank 0's phases as
they come, every rank's output in its own log file, the first rank's error as the root cause
(the run itself is a job: ``jobs/mpi_job.py``), and what a failed run leaves removed.

mpiexec is Open MPI's (``--tag-output`` prefixes what it forwards with the rank: how the output is
split per rank); each rank runs ``python -m partitioner.distributed``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..config import ClusterConfig
from ..errors import ConfigError, JobFailed
from ..hosts.openssh import ssh_config_text
from ..hosts.transport import SSHTransport

RANK_MODULE = "partitioner.distributed"
# mpiexec puts this tag before every chunk it read from a rank, not before every line: a line
# a rank wrote in two writes comes as two tagged pieces, with pieces of other ranks' lines
# between them on the same line of mpiexec's output.
_TAG = re.compile(r"\[(\d+),(\d+)\]<(stdout|stderr|stddiag)>:")
_SIGNALLED = re.compile(r"rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_EXITED = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]")
MPIEXEC_LINES = 6  # of mpiexec's own message, in the error when no rank said what failed
TAIL_LINES = 5  # of a failed rank's stderr, in the error when it printed no error of its own
INSTALL_HINT = ("install Open MPI and the ParMETIS-compatible library (Debian: apt-get install "
                "openmpi-bin libopenmpi-dev libptscotch-dev) and mpi4py (pip install "
                "'dglctl[mpi]')")


def find_mpiexec() -> str:
    """The mpiexec on PATH (Open MPI's), or a ConfigError saying how to install it."""
    exe = shutil.which("mpiexec")
    if exe is None:
        raise ConfigError("--distributed needs mpiexec, which is not on PATH",
                          hint=INSTALL_HINT)
    return exe


def _root_flags() -> list[str]:
    # Open MPI refuses root unless told; containers and CI machines often run as root.
    return ["--allow-run-as-root"] if os.geteuid() == 0 else []


def local_command(ranks: int, rank_args: Sequence[str], *, python: str) -> list[str]:
    """mpiexec of ``ranks`` ranks on this machine (more ranks than cores allowed)."""
    return [find_mpiexec(), *_root_flags(), "--oversubscribe", "--tag-output", "-n", str(ranks),
            python, "-m", RANK_MODULE, *rank_args]


def cluster_command(cluster: ClusterConfig, rank_args: Sequence[str], folder: Path,
                    python: str) -> list[str]:
    """mpiexec of one rank per host of ``cluster``: on this machine with ``python`` (this
    interpreter, as the launcher's local transport does) for a ``local`` cluster, else over
    SSH with the hosts' settings (a config written into ``folder``), each host's rank started
    with its own Python in its workspace. The config holds the options the launcher's own
    ssh gets for each host (``hosts/openssh.py``), from the same resolution."""
    if cluster.transport == "local":
        return local_command(len(cluster.hosts), rank_args, python=python)
    config = folder / "ssh_config"
    config.write_text(ssh_config_text((h, SSHTransport(h, cluster).resolved())
                                      for h in cluster.hosts))
    argv = [find_mpiexec(), *_root_flags(), "--tag-output",
            "--mca", "plm_rsh_agent", f"ssh -F {shlex.quote(str(config))}"]
    for i, h in enumerate(cluster.hosts):
        if i:
            argv.append(":")
        argv += ["-n", "1", "--host", h.address, h.python, "-m", RANK_MODULE, *rank_args]
    return argv


@dataclass
class RankError:
    """The error a rank reported (or the signal that ended it)."""

    rank: int
    host: str
    message: str
    hint: str | None = None
    consequence: str | None = None  # why it follows from another rank's failure

    @classmethod
    def of(cls, rank: int, doc: dict[str, Any]) -> RankError:
        """The error a rank's failure record (``partitioner.distributed.failure``) gives."""
        return cls(rank, str(doc.get("host") or "?"), str(doc["error"]), doc.get("hint"),
                   doc.get("consequence"))


@dataclass
class MpiRun:
    """What a finished run of ranks said: rank 0's result, the first error, the log files."""

    returncode: int
    result: dict[str, Any] | None = None
    error: RankError | None = None  # the root cause
    consequences: list[RankError] = field(default_factory=list)  # what failed after it
    logs: dict[int, Path] = field(default_factory=dict)
    tails: dict[int, deque[str]] = field(default_factory=dict)  # last stderr lines per rank
    said: list[str] = field(default_factory=list)  # mpiexec's own lines (its messages)


class _RankLogs:
    """Every rank's lines in ``folder/rank-R.log``; mpiexec's own in ``mpiexec.log``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[int, IO[str]] = {}
        self.paths: dict[int, Path] = {}
        folder.mkdir(parents=True, exist_ok=True)
        self.own = open(folder / "mpiexec.log", "w")  # noqa: SIM115 - closed in close()

    def write(self, rank: int | None, stream: str, text: str) -> None:
        if rank is None:
            self.own.write(text + "\n")
            self.own.flush()
            return
        f = self.files.get(rank)
        if f is None:
            self.paths[rank] = self.folder / f"rank-{rank}.log"
            f = self.files[rank] = open(self.paths[rank], "w")  # noqa: SIM115
        f.write(f"{stream}: {text}\n")
        f.flush()

    def close(self) -> None:
        for f in [*self.files.values(), self.own]:
            with contextlib.suppress(OSError):
                f.close()


class RankOutput:
    """Reads mpiexec's output line by line (``--tag-output``): every rank's lines to its log,
    rank 0's progress (JSON lines) to ``on_line``, its result and every rank's failure record
    kept (:meth:`finish` gives them, the root cause first)."""

    def __init__(self, logs: Path, on_line: Callable[[dict[str, Any]], None]) -> None:
        self.out = _RankLogs(logs)
        self.on_line = on_line
        self.run = MpiRun(returncode=-1)
        self.failures: list[dict[str, Any]] = []  # the records, as the ranks printed them
        self.signalled: RankError | None = None
        self.exited: int | None = None
        self.pieces: dict[tuple[int, str], str] = {}  # (rank, stream): its line so far

    def feed(self, line: str) -> None:
        """One line of mpiexec's output (without its newline): each rank's pieces in it join
        the rest of that rank's line; the piece the newline ends completes it."""
        tags = list(_TAG.finditer(line))
        own = line[:tags[0].start()] if tags else line
        if own or not tags:
            self._own(own)
        for i, tag in enumerate(tags):
            end = tags[i + 1].start() if i + 1 < len(tags) else len(line)
            key = (int(tag.group(2)), tag.group(3))
            piece = self.pieces.pop(key, "") + line[tag.end():end]
            if i + 1 < len(tags):
                self.pieces[key] = piece
            else:
                self._rank_line(*key, piece)

    def _own(self, line: str) -> None:
        """A line mpiexec wrote itself (its messages about ranks)."""
        run = self.run
        self.out.write(None, "", line)
        if line.strip() and not line.startswith("---"):
            run.said.append(line.strip())
        found = _SIGNALLED.search(line)
        if found and self.signalled is None:
            number = int(found.group(3))
            self.signalled = RankError(int(found.group(1)), found.group(2),
                                       f"ended by signal {number} ({_signal_name(number)})")
        found = _EXITED.search(line)
        if found and self.exited is None:
            self.exited = int(found.group(1))

    def _rank_line(self, rank: int, stream: str, text: str) -> None:
        """A whole line of one rank's ``stream``."""
        run = self.run
        self.out.write(rank, stream, text)
        if stream != "stdout":
            run.tails.setdefault(rank, deque(maxlen=TAIL_LINES)).append(text)
        doc = _json(text)
        if doc is None:
            return
        if "error" in doc:
            self.failures.append({**doc, "rank": rank})
        elif rank == 0 and stream == "stdout" and "config" in doc:
            run.result = doc
        elif rank == 0:
            self.on_line(doc)

    def close(self) -> None:
        """Close the rank logs, with the last pieces of lines no newline ended."""
        pieces, self.pieces = self.pieces, {}
        for (rank, stream), text in pieces.items():
            self._rank_line(rank, stream, text)
        self.out.close()
        self.run.logs = dict(self.out.paths)

    def finish(self, returncode: int) -> MpiRun:
        """What the run said, once mpiexec exited with ``returncode``."""
        from partitioner.distributed.failure import root_cause

        self.close()
        run = self.run
        run.returncode = returncode
        # The first failure in time that does not follow from another's; a rank ended by a
        # signal (no record of its own) goes before errors that are all consequences.
        cause, after = root_cause(self.failures)
        if cause is not None and (not cause.get("consequence") or self.signalled is None):
            run.error = RankError.of(int(cause["rank"]), cause)
            run.consequences = [RankError.of(int(d["rank"]), d) for d in after]
        elif cause is not None:
            run.error = self.signalled
            run.consequences = [RankError.of(int(d["rank"]), d) for d in self.failures]
        if run.error is None and returncode != 0:
            run.error = self.signalled
            if run.error is None and self.exited is not None:
                said = " | ".join(run.tails.get(self.exited, ())) or "nothing on stderr"
                run.error = RankError(self.exited, "?",
                                      f"exited with an error; its last words: {said}")
        return run


def _json(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


def failure(run: MpiRun, logs: Path) -> JobFailed:
    """The error of a failed run: the first rank's own error, else how mpiexec ended."""
    where = f"every rank's output is in {logs}"
    if run.error is not None:
        e = run.error
        hint = f"{e.hint}; {where}" if e.hint else where
        after = ""
        if run.consequences:
            ranks = ", ".join(str(c.rank) for c in run.consequences)
            after = (f" (then rank{'s' if len(run.consequences) > 1 else ''} {ranks} failed "
                     f"as a consequence: {run.consequences[0].consequence or 'after it'})")
        return JobFailed(f"rank {e.rank} on {e.host}: {e.message}{after}", hint=hint)
    said = " ".join(run.said[:MPIEXEC_LINES])
    return JobFailed(f"mpiexec exited with {run.returncode} before rank 0 wrote the partition"
                     + (f": {said}" if said else ""), hint=where)


def remove_leftovers(out: Path, wait: float) -> None:
    """Remove the temporary folders of the failed run's ranks beside ``out`` (on this
    machine): ranks mpiexec ended may take a moment to be reaped, and a live process's
    folder is never touched, so this waits up to ``wait`` seconds for them."""
    from partitioner.format import remove_stale_temps

    deadline = time.monotonic() + wait
    pattern = re.compile(rf"\.{re.escape(out.name)}\.tmp-(\d+)")
    while True:
        remove_stale_temps(out)
        left = [p for p in out.parent.glob(f".{out.name}.tmp-*") if pattern.match(p.name)]
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.1)
