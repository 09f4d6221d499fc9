"""Renewing a supervised job's lease on every host (see ``agent/lease.py``) from a thread, so
that nothing the launcher does in between (copies, starts, a slow host) lets it lapse."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..hosts.agent_client import AgentClient


class LeaseRenewer:
    """Renews ``job_id``'s lease on every host every ``interval`` seconds until stopped.

    Each host is renewed on its own: a host that does not answer (cut off, its renewal
    waiting out ``call_timeout``) is skipped until its renewal under way ends, and never
    holds back the others' (their leases would lapse behind it, and end their processes).
    A host that cannot be reached is tried again next time; its processes end by themselves
    if it stays cut off for the lease's length, and the launcher's own probes report it.
    ``clients`` is read afresh each time: a spare that takes a lost host's place in it is
    renewed from then on.
    """

    def __init__(self, clients: Sequence[AgentClient], job_id: str, interval: float,
                 call_timeout: float) -> None:
        self.clients = clients
        self.job_id = job_id
        self.interval = interval
        self.call_timeout = call_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{job_id}", daemon=True)
        # id(client) -> (the client, its renewal under way); the client is kept so that its
        # id is not another's.
        self._pending: dict[int, tuple[AgentClient, threading.Thread]] = {}

    def start(self) -> LeaseRenewer:
        """Begin renewing (the first renewal comes after one interval)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for client in list(self.clients):
                under_way = self._pending.get(id(client))
                if under_way is not None and under_way[1].is_alive():
                    continue  # still waiting on this host: the others go on
                t = threading.Thread(target=self._renew, args=(client,), daemon=True,
                                     name=f"lease-{self.job_id}-{client.host.name}")
                self._pending[id(client)] = (client, t)
                t.start()

    def _renew(self, client: AgentClient) -> None:
        try:
            client.renew(self.job_id, self.call_timeout)
        except Exception:  # noqa: BLE001 - tried again next time; probes report a lost host
            pass

    def stop(self) -> None:
        """Renew no more; returns once the renewals under way on the job's hosts have
        finished (not one still waiting on a lost host that a spare replaced)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + 5)
        current = {id(c) for c in self.clients}
        for key, (_, t) in list(self._pending.items()):
            if key in current:
                t.join(self.call_timeout + 5)
