"""Restarting a job's trainers: the record of each failed attempt, and the rule that tells a
bug from a fault (an attempt that fails where the attempts before it failed).

``launch --max-restarts N`` (YAML ``max_restarts``) keeps the servers and starts every trainer
again when one fails, up to N times, as torchrun does; each failed attempt is recorded in the
job's manifest (``attempts``) with its cause, which ``status`` and ``logs --attempt K`` show.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..hosts.agent_client import ProcState
from .observe import root_cause
from .plan import first_attempt_name

# Attempts that fail at one point (an exception of the same type, raised at the same line, on
# the same batch) in a row: the failure is the script's, and restarting it again cannot help.
SAME_POINT_ATTEMPTS = 3


@dataclass(frozen=True)
class Failure:
    """What a failed check of a job's processes found: the failed processes, the message
    (root cause first, with the last lines of its log) and the result to record."""

    failed: Sequence[ProcState]
    message: str
    result: dict[str, Any]


def failure_point(state: ProcState) -> str | None:
    """Where a process failed, in words: its exception's type, the line that raised it and
    the batch the loaders were on (not the exception's text, which may name a value that
    differs each time); None when it recorded no exception (killed, OOM, lost)."""
    error = state.error or {}
    if not error.get("message"):
        return None
    kind = str(error["message"]).split(":", 1)[0]
    where = f" at {error['file']}:{error['line']}" if error.get("file") else ""
    at = error.get("at")
    batch = f", epoch {at['epoch']} batch {at['batch']}" if isinstance(at, dict) else ""
    return f"{kind}{where}{batch}"


def attempt_record(attempt: int, started: float, failure: Failure) -> dict[str, Any]:
    """The manifest's record of a failed attempt: its number, start and end, the cause's
    first line, the process that failed first and how, its exception, the point it failed
    at (:func:`failure_point`), and the whole failure message (``report``)."""
    first = root_cause(failure.failed)
    return {
        "process": first_attempt_name(first.name),
        "attempt": attempt,
        "started": started,
        "ended": first.ended if first.ended is not None else time.time(),
        "cause": failure.message.splitlines()[0],
        "root_cause": failure.result.get("root_cause"),
        "how": failure.result.get("how"),
        "exception": failure.result.get("exception"),
        "point": failure_point(first),
        "report": failure.message,
    }


def lost_record(attempt: int, started: float, lost: Mapping[str, str],
                failure: Failure | None) -> dict[str, Any]:
    """The manifest's record of an attempt that ended because hosts were lost (``lost``:
    host name -> why its agent does not answer, in words that name the host); ``failure``,
    what the check found of the processes meanwhile (the trainers that lost their servers),
    goes in its report."""
    names = ", ".join(lost)
    why = "; ".join(lost.values())
    report = (f"host{'s' if len(lost) > 1 else ''} {names} lost (its agent did not answer, "
              f"over the job's connection or a new one): {why}")
    if failure is not None:
        report += "\n" + failure.message
    return {
        "process": None,
        "attempt": attempt,
        "started": started,
        "ended": time.time(),
        "cause": report.splitlines()[0],
        "root_cause": None,
        "how": "host lost",
        "exception": None,
        "point": None,
        "report": report,
        "lost_hosts": list(lost),
    }


def permanent_failure(failure: Failure) -> str | None:
    """The exception of the failure's root cause when it says it would fail the same way on
    every attempt (``runtime.errors.DistError.permanent``: a wrong setting, not a fault), else
    None: such a failure ends the job at once, with its restarts left unused."""
    if not failure.failed:
        return None
    error = root_cause(failure.failed).error or {}
    return str(error.get("message") or "its error") if error.get("permanent") else None


def repeated_point(attempts: Sequence[dict[str, Any]]) -> str | None:
    """The point the last :data:`SAME_POINT_ATTEMPTS` attempts all failed at (the same
    process, exception type, line and batch), else None."""
    last = attempts[-SAME_POINT_ATTEMPTS:]
    if len(last) < SAME_POINT_ATTEMPTS:
        return None
    points = {(a.get("process"), a.get("point")) for a in last}
    if len(points) != 1:
        return None
    (root, point), = points
    return None if point is None else f"{root}: {point}"
