"""Client side of the transport: one DEALER socket per server, concurrent batched requests.

Requests to several servers are sent first and answered together, so a step that touches
every machine costs one round trip, not one per machine. Every wait is bounded: a server that
neither answers nor answers pings within the timeout is reported by machine, server and address.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from . import __version__
from .errors import HandshakeError, PeerTimeout, RemoteError
from .ip_config import Machine
from .wire import PROTOCOL_VERSION, pack, unpack

PING_INTERVAL = 1.0


@dataclass
class Request:
    """One request to server ``server_id`` of machine ``machine_id``."""

    machine_id: int
    server_id: int
    header: dict[str, Any]
    arrays: list[np.ndarray]
    # Called with (row0, rows) for each piece of a streamed reply (a pull sent with
    # ``stream: <piece bytes>``) as it arrives, so the copy overlaps the rest of the transfer.
    sink: Callable[[int, np.ndarray], None] | None = None


class ServerPool:
    """Connections from one trainer or sampler to every server of the job."""

    def __init__(
        self, machines: list[Machine], num_servers: int, token: str, timeout: float,
        client_name: str = "client", keeps_server: bool = True,
    ) -> None:
        self.machines = machines
        self.num_servers = num_servers
        self.token = token
        self.timeout = timeout
        self.client_name = client_name
        self.keeps_server = keeps_server
        self._ctx = zmq.Context.instance()
        self._socks: dict[tuple[int, int], zmq.Socket] = {}
        self._ids = itertools.count(1)
        self._rr = itertools.count()
        for m in machines:
            for k in range(num_servers):
                s = self._ctx.socket(zmq.DEALER)
                s.setsockopt(zmq.LINGER, 0)
                s.setsockopt(zmq.HEARTBEAT_IVL, 1000)
                s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)
                s.connect(m.server_addr(k))
                self._socks[(m.machine_id, k)] = s

    def describe(self, machine_id: int, server_id: int) -> str:
        m = self.machines[machine_id]
        return f"server {server_id} of machine {machine_id} ({m.ip}:{m.server_port(server_id)})"

    def connect(self, connect_timeout: float | None = None) -> None:
        """Handshake with every server (they may still be starting: wait up to the timeout)."""
        reqs = [
            Request(m, k, {"op": "hello", "token": self.token, "version": PROTOCOL_VERSION,
                           "runtime": __version__, "client": self.client_name,
                           "keeps_server": self.keeps_server}, [])
            for (m, k) in self._socks
        ]
        try:
            self.call_many(reqs, timeout=connect_timeout or self.timeout)
        except RemoteError as e:
            raise HandshakeError(str(e)) from None

    def pick(self, machine_id: int) -> int:
        """A server of ``machine_id``: requests are spread over its main and backup servers."""
        return next(self._rr) % self.num_servers

    def call(self, machine_id: int, server_id: int, header: dict[str, Any],
             arrays: list[np.ndarray] | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
        """One request, one reply."""
        return self.call_many([Request(machine_id, server_id, header, list(arrays or []))])[0]

    def call_many(
        self, reqs: list[Request], timeout: float | None = None, max_wait: float | None = None
    ) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
        """Send every request, then collect every reply (in request order).

        A server that stays silent — no reply and no answer to pings — for ``timeout`` seconds
        raises PeerTimeout naming it; an error reply raises RemoteError naming it. A reply that
        a live server withholds (a barrier whose peers never arrive) is waited for at most
        ``max_wait`` seconds (default: ``timeout``).
        """
        return self.send_many(reqs, timeout, max_wait).collect()

    def send_many(
        self, reqs: list[Request], timeout: float | None = None, max_wait: float | None = None
    ) -> PendingReplies:
        """Send every request now; ``collect()`` on the result waits for the replies (so the
        caller can work while they are in flight)."""
        pending: dict[int, int] = {}
        where: dict[int, tuple[int, int]] = {}
        for i, r in enumerate(reqs):
            rid = next(self._ids)
            header = dict(r.header, id=rid)
            self._socks[(r.machine_id, r.server_id)].send_multipart(pack(header, r.arrays),
                                                                     copy=False)
            pending[rid] = i
            where[rid] = (r.machine_id, r.server_id)
        return PendingReplies(self, reqs, pending, where,
                              self.timeout if timeout is None else timeout, max_wait)

    def close(self) -> None:
        for s in self._socks.values():
            s.close(0)
        self._socks.clear()


class PendingReplies:
    """Replies still on their way from ``ServerPool.send_many``."""

    def __init__(self, pool: ServerPool, reqs: list[Request], pending: dict[int, int],
                 where: dict[int, tuple[int, int]], timeout: float, max_wait: float | None):
        self.pool = pool
        self.reqs = reqs
        self.pending = pending
        self.where = where
        self.timeout = timeout
        self.max_wait = timeout if max_wait is None else max_wait
        self.started = time.monotonic()
        self.pieces: dict[int, int] = {}

    def collect(self) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
        """Wait for every reply (see ``ServerPool.call_many`` for the error rules)."""
        pool, reqs, pending, where = self.pool, self.reqs, self.pending, self.where
        timeout, max_wait, started = self.timeout, self.max_wait, self.started
        results: list[Any] = [None] * len(reqs)
        poller = zmq.Poller()
        keys = {where[rid] for rid in pending}
        for key in keys:
            poller.register(pool._socks[key], zmq.POLLIN)
        now = time.monotonic()
        heard = {key: now for key in keys}
        pinged = {key: now for key in keys}
        pings: set[int] = set()
        errors: list[str] = []
        while pending:
            events = dict(poller.poll(100))
            now = time.monotonic()
            for key in keys:
                sock = pool._socks[key]
                if sock not in events:
                    continue
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    header, arrays = unpack(frames)
                    heard[key] = now
                    rid = header.get("id")
                    if rid in pings:
                        pings.discard(rid)
                        continue
                    if rid not in pending:
                        continue  # a late reply of an abandoned request
                    idx = pending[rid]
                    if "chunks" in header and "error" not in header:
                        if not self._piece(idx, header, arrays):
                            continue  # more pieces of this reply to come
                        header, arrays = {"id": rid}, []
                    del pending[rid]
                    if "error" in header:
                        errors.append(f"{pool.describe(*key)}: {header['error']}")
                    results[idx] = (header, arrays)
            waiting = {where[rid] for rid in pending}
            if waiting and now - started > max_wait:
                names = ", ".join(pool.describe(*k) for k in sorted(waiting))
                raise PeerTimeout(
                    f"{names}: no reply to {reqs[pending[min(pending)]].header.get('op')!r} "
                    f"within {max_wait:.0f}s although the server is alive",
                    hint="a barrier whose other participants never arrived (a trainer died?)",
                )
            for key in waiting:
                if now - heard[key] > timeout:
                    raise PeerTimeout(
                        f"{pool.describe(*key)} did not answer within {timeout:.0f}s",
                        hint="the server process died or is overloaded; see its log",
                    )
                if now - heard[key] > PING_INTERVAL and now - pinged[key] > PING_INTERVAL:
                    # Long waits (a barrier) stay alive while the server answers pings.
                    rid = next(pool._ids)
                    pings.add(rid)
                    pool._socks[key].send_multipart(pack({"op": "ping", "id": rid}))
                    pinged[key] = now
        if errors:
            raise RemoteError("; ".join(errors))
        return results

    def _piece(self, idx: int, header: dict[str, Any], arrays: list[np.ndarray]) -> bool:
        """Hand one piece of a streamed reply to its request's sink; True once all arrived."""
        sink = self.reqs[idx].sink
        if sink is None:
            raise RemoteError(f"a streamed reply to request {idx} that has no sink")
        sink(int(header["row0"]), arrays[0])
        self.pieces[idx] = self.pieces.get(idx, 0) + 1
        return self.pieces[idx] == int(header["chunks"])
