"""What a failing rank reports, and which of several ranks' reports is the root cause.

A rank that fails prints one record (a JSON line, :func:`failure_record`) and aborts every
rank. Other ranks may fail in the moments before the abort reaches them, and their errors
follow from the first one: a collective broken by the aborting peer, the shared temporary
folder gone. Such an error is marked a consequence; :func:`root_cause` picks the earliest
failure that is not one, so a user reads the cause, never what followed from it.
"""

from __future__ import annotations

import errno
import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from ..errors import PartitionerError


def _consequence(exc: BaseException, out: Path) -> str | None:
    """Why ``exc`` follows from another rank's failure (None where it may be a cause)."""
    if type(exc).__module__ == "mpi4py.MPI":  # MPI.Exception: a call MPI itself failed
        return "a collective failed: another rank had ended"
    if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
        temp = f"{os.sep}.{out.name}.tmp-"
        if any(temp in str(name) for name in (exc.filename, exc.filename2) if name):
            return "its temporary output folder was gone"
    return None


def failure_record(exc: BaseException, rank: int, out: str | Path) -> dict[str, Any]:
    """The record rank ``rank`` prints when ``exc`` ends it: the message (and hint) a user
    reads, where and when (wall clock) it failed, whether it follows from another rank's
    failure (``consequence``: why, else None), and the traceback of an unexpected error."""
    known = isinstance(exc, PartitionerError)
    return {"error": str(exc) if known else f"{type(exc).__name__}: {exc}",
            "hint": getattr(exc, "hint", None), "rank": rank, "host": socket.gethostname(),
            "time": time.time(), "consequence": _consequence(exc, Path(out)),
            "traceback": None if known else traceback.format_exc()}


def root_cause(records: list[dict[str, Any]]) -> tuple[dict[str, Any] | None,
                                                        list[dict[str, Any]]]:
    """The root cause among ranks' failure records, and the others in time order.

    The cause is the earliest record that is not a consequence; where every record is one,
    the earliest of them (it still says what went wrong). A record without a time (an older
    rank's) counts as later than any with one, in the order given.
    """
    if not records:
        return None, []
    order = sorted(range(len(records)),
                   key=lambda i: (records[i].get("time") is None,
                                  float(records[i].get("time") or 0.0), i))
    ranked = [records[i] for i in order]
    cause = next((r for r in ranked if not r.get("consequence")), ranked[0])
    return cause, [r for r in ranked if r is not cause]
