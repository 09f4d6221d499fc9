"""Watching a job's processes: probe them on every host, stream their logs as
``[host role rank]`` lines, and name the root cause when some fail (the earliest failure)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Sequence

from ..hosts.agent_client import AgentClient, ProcState, ProcStatus, probe_hosts, read_logs
from .manifest import JobManifest, ProcRecord


def probe_job(clients: Sequence[AgentClient], manifest: JobManifest) -> dict[str, ProcState]:
    """The state of every recorded process of the job, from every host at once."""
    return probe_hosts(clients, manifest.job_id, manifest.procs_per_host())


class LogStream:
    """New lines of the tracked processes' logs, read from every host at once.

    With ``whole_lines`` (following a live job), a line is printed only once its newline has
    arrived; the rest waits for the next poll.
    """

    def __init__(self, clients: Sequence[AgentClient], job_id: str,
                 procs: Iterable[ProcRecord] = (), *, whole_lines: bool = True) -> None:
        self.clients = clients
        self.job_id = job_id
        self.whole_lines = whole_lines
        self.procs: dict[str, ProcRecord] = {}
        self.offsets: dict[str, int] = {}
        for p in procs:
            self.track(p)

    def track(self, proc: ProcRecord) -> None:
        """Follow ``proc``'s log from its start."""
        self.procs[proc.name] = proc
        self.offsets.setdefault(proc.name, 0)

    def label(self, proc: ProcRecord) -> str:
        """``[host role rank]`` of a tracked process."""
        return f"[{self.clients[proc.host].host.name} {proc.role} {proc.rank}]"

    def poll(self) -> tuple[list[str], int]:
        """``(prefixed new lines, bytes read)`` since the last poll."""
        per_host: list[dict[str, int]] = [{} for _ in self.clients]
        for name, p in self.procs.items():
            per_host[p.host][name] = self.offsets[name]
        lines: list[str] = []
        read = 0
        for name, chunk in read_logs(self.clients, self.job_id, per_host).items():
            text = chunk.text
            read += chunk.offset - self.offsets[name]
            cut = text.rfind("\n") + 1 if self.whole_lines else len(text)
            # The offset after what was printed; the rest is read again next time.
            self.offsets[name] = chunk.offset - len(text[cut:].encode())
            prefix = self.label(self.procs[name]) + " "
            lines.extend(prefix + line for line in text[:cut].splitlines())
        return lines, read


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
                   tail: Callable[[ProcRecord], list[str]]) -> tuple[str, dict[str, str]]:
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
    result = {"root_cause": rec.name, "how": how}
    if first.error:
        result["exception"] = first.error.get("message")
    return msg, result
