"""Watching a job's processes: probe them on every host, stream their logs as
``[host role rank]`` lines, and name the root cause when some fail (the earliest failure)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..hosts.agent_client import (
    AgentClient,
    LogChunk,
    LogStart,
    ProcState,
    ProcStatus,
    probe_hosts,
    read_logs,
)
from .manifest import JobManifest, JobState, ProcRecord


def probe_job(clients: Sequence[AgentClient], manifest: JobManifest) -> dict[str, ProcState]:
    """The state of every process of the job's attempt under way, from every host at once
    (the processes of earlier attempts have ended: their attempt's record says how)."""
    return probe_hosts(clients, manifest.job_id, manifest.procs_per_host(live=True))


@dataclass(frozen=True)
class LogLine:
    """One whole line of one process's log (without its newline)."""

    host: str
    proc: ProcRecord
    text: str

    def prefixed(self) -> str:
        """The line as people read it: ``[host role rank] text``."""
        return f"[{self.host} {self.proc.role} {self.proc.rank}] {self.text}"

    def as_json(self) -> dict[str, Any]:
        """The line for ``--json``: host, role, rank, line."""
        return {"host": self.host, "role": self.proc.role, "rank": self.proc.rank,
                "line": self.text}


class LogStream:
    """New lines of the tracked processes' logs, read from every host at once.

    Lines are whole: the agent never cuts a character, and what follows a log's last newline
    waits for the rest of its line (:meth:`flush` gives it, once nothing more will come).
    Without ``whole_lines`` that unfinished part is given at once, as a line of its own.
    ``start`` places each log's first read (its last lines, or the lines since a time).
    """

    def __init__(self, clients: Sequence[AgentClient], job_id: str,
                 procs: Iterable[ProcRecord] = (), *, whole_lines: bool = True,
                 start: LogStart | None = None) -> None:
        self.clients = clients
        self.job_id = job_id
        self.whole_lines = whole_lines
        self.start = start
        self.procs: dict[str, ProcRecord] = {}
        self.offsets: dict[str, int] = {}
        self.pending: dict[str, str] = {}  # the unfinished last line of each log
        self.chunks: dict[str, LogChunk] = {}  # the last read of each log
        self.unread: set[str] = set()  # logs not read yet: their read begins at ``start``
        for p in procs:
            self.track(p)

    def track(self, proc: ProcRecord) -> None:
        """Follow ``proc``'s log from its start (or from ``start``)."""
        if proc.name not in self.procs:
            self.unread.add(proc.name)
        self.procs[proc.name] = proc
        self.offsets.setdefault(proc.name, 0)
        self.pending.setdefault(proc.name, "")

    def forget(self, names: Iterable[str]) -> None:
        """Stop following the named logs (processes of an ended attempt, read to the end)."""
        for name in names:
            for table in (self.procs, self.offsets, self.pending, self.chunks):
                table.pop(name, None)  # type: ignore[attr-defined]
            self.unread.discard(name)

    def label(self, proc: ProcRecord) -> str:
        """``[host role rank]`` of a tracked process."""
        return f"[{self.clients[proc.host].host.name} {proc.role} {proc.rank}]"

    def read(self, names: Iterable[str] | None = None) -> tuple[list[LogLine], int]:
        """``(whole new lines, bytes read)`` of the named logs (default: every tracked one),
        one agent call per host, at most one read's worth of each log (see ``more``)."""
        wanted = list(self.procs) if names is None else list(names)
        first = [n for n in wanted if n in self.unread]
        later = [n for n in wanted if n not in self.unread]
        chunks: dict[str, LogChunk] = {}
        for group, start in ((first, self.start), (later, None)):
            if group:
                per_host: list[dict[str, int]] = [{} for _ in self.clients]
                for name in group:
                    per_host[self.procs[name].host][name] = self.offsets[name]
                chunks.update(read_logs(self.clients, self.job_id, per_host, start=start))
        lines: list[LogLine] = []
        read = 0
        for name in wanted:  # in the order asked, not the order the hosts answered
            chunk = chunks.get(name)
            if chunk is None:
                continue
            self.unread.discard(name)
            self.chunks[name] = chunk
            began = chunk.start if chunk.start is not None else self.offsets[name]
            read += chunk.offset - began
            self.offsets[name] = chunk.offset
            parts = (self.pending[name] + chunk.text).split("\n")
            self.pending[name] = parts.pop()
            if not self.whole_lines and self.pending[name]:
                parts.append(self.pending[name])
                self.pending[name] = ""
            lines.extend(self._line(name, t) for t in parts)
        return lines, read

    def more(self, name: str) -> bool:
        """Whether ``name``'s log had more than its last read returned (or is unread)."""
        chunk = self.chunks.get(name)
        return name in self.unread or (chunk is not None and chunk.more)

    def drain(self, names: Iterable[str] | None = None) -> Iterator[LogLine]:
        """Every line of the named logs (default: all) up to where each ended at its first
        read (one agent call per host per read), then their unfinished last lines."""
        wanted = list(self.procs) if names is None else list(names)
        ends = {n: self._end(n) for n in wanted if n in self.chunks}
        while wanted := [n for n in wanted if not self._caught_up(n, ends)]:
            lines, _ = self.read(wanted)
            yield from lines
            for name in wanted:
                ends.setdefault(name, self._end(name))
        yield from self.flush(names)

    def _end(self, name: str) -> int:
        chunk = self.chunks[name]
        return chunk.size if chunk.size is not None else chunk.offset

    def _caught_up(self, name: str, ends: dict[str, int]) -> bool:
        chunk = self.chunks.get(name)
        if chunk is None or name in self.unread:
            return False
        # The end seen first is reached, the agent says there is no more, or no progress
        # (a broken last character the agent holds back).
        return chunk.offset >= ends[name] or not chunk.more or chunk.offset == chunk.start

    def flush(self, names: Iterable[str] | None = None) -> list[LogLine]:
        """The unfinished last lines of the named logs (once no more will come)."""
        out = []
        for name in list(self.procs) if names is None else names:
            if self.pending[name]:
                out.append(self._line(name, self.pending[name]))
                self.pending[name] = ""
        return out

    def poll(self) -> tuple[list[str], int]:
        """``(prefixed new lines, bytes read)`` since the last poll."""
        lines, read = self.read()
        return [line.prefixed() for line in lines], read

    def _line(self, name: str, text: str) -> LogLine:
        proc = self.procs[name]
        return LogLine(self.clients[proc.host].host.name, proc, text)


def signal_name(sig: int | None) -> str:
    """``SIGKILL`` for 9; ``?`` when unknown."""
    try:
        return signal.Signals(sig).name if sig else "?"
    except ValueError:
        return "?"


def how_it_ended(state: ProcState) -> str:
    """A process's end in words: 'exited with code 3', 'was killed by signal 9 (SIGKILL)'."""
    if state.lease_expired is not None:
        return (f"was ended by its host's agent: the launcher had not renewed the job's lease "
                f"there for {state.lease_expired:.0f}s (the launcher was killed, stalled, or "
                "cut off from the host)")
    return {ProcStatus.EXITED: f"exited with code {state.code}",
            ProcStatus.KILLED: f"was killed by signal {state.signal} ({signal_name(state.signal)})",
            ProcStatus.MISSING: "disappeared (killed together with its wrapper)",
            ProcStatus.RUNNING: "is running but its peers are gone"}[state.state]


def root_cause(failed: Sequence[ProcState]) -> ProcState:
    """The failure that came first: the earliest recorded end (one without an end time, a
    missing process, comes after every recorded one); ties keep the given order."""
    if not failed:
        raise ValueError("no failed process to choose from")
    return min(failed, key=_end_time)


def _end_time(state: ProcState) -> float:
    return state.ended if state.ended is not None else float("inf")


def failure_report(manifest: JobManifest, failed: Sequence[ProcState], host_names: Sequence[str],
                   tail: Callable[[ProcRecord], list[str]]
                   ) -> tuple[str, dict[str, str | None]]:
    """The message of a failed job, root cause first (with the last lines of its log), and
    the result to record in the manifest."""
    first = root_cause(failed)
    rec = next(p for p in manifest.procs if p.name == first.name)
    how = how_it_ended(first)
    msg = (f"job {manifest.job_id} failed: [{host_names[rec.host]} {rec.role} {rec.rank}] "
           f"({rec.name}, process group {rec.pgid}) {how}.")
    others = [s.name for s in sorted(failed, key=_end_time) if s is not first]
    if others:
        msg += f" Also failed: {', '.join(others)}."
    if first.error and first.error.get("message"):
        where = (f" ({first.error['file']}:{first.error['line']})" if first.error.get("file")
                 else "")
        msg += f"\nuncaught exception: {first.error['message']}{where}"
    lines = tail(rec)
    if lines:
        msg += "\nlast lines of its log:\n    " + "\n    ".join(lines)
    # The exception's message comes from the agent's JSON: absent there, it is None here.
    result: dict[str, str | None] = {"root_cause": rec.name, "how": how}
    if first.error:
        result["exception"] = first.error.get("message")
    return msg, result


def _process_alive(pid: int) -> bool | None:
    """Whether process PID of this host runs (a zombie, ended but not reaped, does not); None
    where that cannot be told (it belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return None
    try:
        # /proc/PID/stat: "pid (comm) S ...": the state follows the last ")".
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def launcher_gone(manifest: JobManifest, states: Mapping[str, ProcState],
                  now: float | None = None) -> bool:
    """Whether the job's launcher (a detached job's: its background supervisor) can no longer
    record how the job ended: its process is gone (it ran on this host), or every process of
    the job ended longer ago than the job's lease (a live launcher records the end within a
    second of the last process's)."""
    launcher = manifest.launcher or {}
    if launcher.get("host") == socket.gethostname() and isinstance(launcher.get("pid"), int):
        alive = _process_alive(int(launcher["pid"]))
        if alive is not None:
            return not alive
    ended = [s.ended for s in states.values() if s.ended is not None]
    lease = manifest.lease_seconds or 0.0
    return bool(ended) and (now or time.time()) - max(ended) > lease


def settled_state(manifest: JobManifest, states: Mapping[str, ProcState],
                  host_names: Sequence[str]) -> tuple[JobState, str | None] | None:
    """How a job whose launcher is gone ended, from its processes' exit codes: succeeded when
    every trainer of its last attempt exited 0, else failed with the root cause in words
    (None while any of its processes runs, or while its launcher may still record it)."""
    if not states or any(s.state is ProcStatus.RUNNING for s in states.values()):
        return None
    if not launcher_gone(manifest, states):
        return None
    trainers = [states[p.name] for p in manifest.live_procs()
                if p.role == "trainer" and p.name in states]
    if trainers and all(s.succeeded for s in trainers):
        return JobState.SUCCEEDED, None
    failed = [s for s in states.values() if s.failed] or list(states.values())
    first = root_cause(failed)
    rec = next((p for p in manifest.procs if p.name == first.name), None)
    where = (f"[{host_names[rec.host]} {rec.role} {rec.rank}] ({rec.name})" if rec is not None
             else first.name)
    return JobState.FAILED, (f"{where} {how_it_ended(first)}; its launcher had ended without "
                             "recording it (settled from the processes' exit statuses)")
