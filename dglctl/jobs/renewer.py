"""Renewing a supervised job's lease on every host (see ``agent/lease.py``) from a thread, so
that nothing the launcher does in between (copies, starts, a slow host) lets it lapse."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

from ..errors import DglctlError
from ..hosts.agent_client import AgentClient
from ..hosts.group import fan_out


class LeaseRenewer:
    """Renews ``job_id``'s lease on every host every ``interval`` seconds until stopped.

    A host that cannot be reached is tried again next time; its processes end by themselves
    if it stays cut off for the lease's length, and the launcher's own probes report it.
    """

    def __init__(self, clients: Sequence[AgentClient], job_id: str, interval: float,
                 call_timeout: float) -> None:
        self.clients = clients
        self.job_id = job_id
        self.interval = interval
        self.call_timeout = call_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{job_id}", daemon=True)

    def start(self) -> LeaseRenewer:
        """Begin renewing (the first renewal comes after one interval)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            # A host that did not answer is tried again next time; the launcher's own
            # probes report one that stays away.
            with contextlib.suppress(DglctlError):
                fan_out(self.clients, lambda i, c: c.renew(self.job_id, self.call_timeout))

    def stop(self) -> None:
        """Renew no more; returns once a renewal under way has finished."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.call_timeout + 5)
