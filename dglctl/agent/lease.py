"""The job lease on a host: a file in the job's folder that a supervising launcher renews
(touches) every half timeout; each process's wrapper stops its process once the file has not
changed for ``LEASE_TIMEOUTS`` job timeouts. So a launcher that is SIGKILLed, loses its
SSH connection or its machine leaves nothing running for long; a ``--detach``ed job has no
lease, and its wrappers wait for their processes alone.

Silence is measured on the monotonic clock of the host that watches (a changed
modification time counts as a renewal, whichever way the wall clock stepped), so clock
corrections neither end a job nor keep an abandoned one alive. Its name and timing
(``LEASE_NAME``, ``lease_seconds``, ``renew_interval``) are in ``protocol.py``: the launcher
renews what the agent watches.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def renew(path: Path) -> None:
    """Touch the lease file (created 0600 if missing)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.utime(fd)
    finally:
        os.close(fd)


def age(path: Path) -> float | None:
    """Seconds since the lease was last renewed, on this host's wall clock (None: no lease)."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


class LeaseWatch:
    """Tells how long the lease file has been silent, since the watch began at the latest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime = self._read()
        self._changed = time.monotonic()

    def _read(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None  # removed (the job's folder deleted): no more renewals

    def silence(self) -> float:
        """Seconds since the file last changed."""
        now = self._read()
        if now is not None and now != self._mtime:
            self._mtime, self._changed = now, time.monotonic()
        return time.monotonic() - self._changed
