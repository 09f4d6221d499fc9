"""Client side of the transport: one DEALER socket per server, concurrent batched requests.

Requests to several servers are sent first and answered together, so a step that touches
every machine costs one round trip, not one per machine. Every wait is bounded: a server that
neither answers nor answers pings within the timeout is reported by machine, server and address.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq
import zmq.utils.monitor as zmon

from partitioner.version import __version__

from ..errors import DistError, HandshakeError, PeerTimeout, ProtocolError, from_wire
from .ip_config import Machine
from .liveness import Liveness
from .messages import ErrorReply, Hello, Message, Ping, PullPiece, decode, encode
from .security import secure_client
from .wire import PROTOCOL_VERSION


@dataclass
class Request:
    """One request to server ``server_id`` of machine ``machine_id``."""

    machine_id: int
    server_id: int
    message: Message
    # Called with (row0, rows) for each piece of a streamed reply (a ``Pull`` with
    # ``stream=<piece bytes>``) as it arrives, so the copy overlaps the rest of the transfer.
    sink: Callable[[int, np.ndarray], None] | None = None


class ServerPool:
    """Connections from one trainer or sampler to every server of the job."""

    def __init__(
        self, machines: list[Machine], num_servers: int, token: str, timeout: float,
        client_name: str = "client", keeps_server: bool = True, role: str = "client",
        encrypt: bool = False, attempt: int = 0,
    ) -> None:
        self.machines = machines
        self.num_servers = num_servers
        self.token = token
        self.timeout = timeout
        self.client_name = client_name
        self.keeps_server = keeps_server
        self.role = role
        self.encrypt = encrypt
        self.attempt = attempt  # the job's attempt (the servers keep state per attempt)
        self._ctx: zmq.Context = zmq.Context.instance()
        self._socks: dict[tuple[int, int], zmq.Socket] = {}
        # Handshake outcomes per socket, read only when a send finds no connection.
        self._monitors: dict[tuple[int, int], zmq.Socket] = {}
        self._refused: dict[tuple[int, int], str] = {}
        self._handshakes: set[tuple[int, int]] = set()  # keys whose handshake succeeded
        self._ids = itertools.count(1)
        self._rr = itertools.count()
        self.liveness = Liveness(timeout)
        for m in machines:
            for k in range(num_servers):
                s = self._ctx.socket(zmq.DEALER)
                s.setsockopt(zmq.LINGER, 0)
                # A fixed identity: after a reconnect (a network blip, a long stall) the
                # server knows this socket as the one that sent the job token. (ZeroMQ
                # reserves identities starting with a zero byte for its own.)
                s.setsockopt(zmq.ROUTING_ID, b"c" + os.urandom(15))
                self.liveness.configure(s)
                secure_client(s, token, encrypt)
                # Never block on a send: after a refused handshake ZeroMQ has no connection
                # to queue on, and a blocked send would hang the trainer (see _send).
                s.setsockopt(zmq.SNDTIMEO, 0)
                self._monitors[(m.machine_id, k)] = s.get_monitor_socket(
                    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
                s.connect(m.server_addr(k))
                self._socks[(m.machine_id, k)] = s

    def sibling(self, client_name: str, role: str) -> ServerPool:
        """New connections to the same servers with the same job token (not yet connected):
        for a forked sampler process or a prefetch thread, which never share these sockets."""
        return ServerPool(self.machines, self.num_servers, self.token, self.timeout,
                          client_name=client_name, role=role, encrypt=self.encrypt,
                          attempt=self.attempt)

    def describe(self, machine_id: int, server_id: int) -> str:
        m = self.machines[machine_id]
        return f"server {server_id} of machine {machine_id} ({m.ip}:{m.server_port(server_id)})"

    def connect(self, connect_timeout: float | None = None) -> None:
        """Handshake with every server (they may still be starting: wait up to the timeout)."""
        hello = Hello(self.token, PROTOCOL_VERSION, __version__, self.client_name,
                      self.keeps_server, self.role, self.attempt)
        reqs = [Request(m, k, hello) for (m, k) in self._socks]
        try:
            self.call_many(reqs, timeout=connect_timeout or self.timeout)
        except (HandshakeError, PeerTimeout):
            raise
        except DistError as e:
            raise HandshakeError(e.message, e.hint) from None

    def pick(self, machine_id: int) -> int:
        """A server of ``machine_id``: requests are spread over its main and backup servers."""
        return next(self._rr) % self.num_servers

    def call(self, machine_id: int, server_id: int, message: Message) -> Message:
        """One request, one reply."""
        return self.call_many([Request(machine_id, server_id, message)])[0]

    def call_many(
        self, reqs: list[Request], timeout: float | None = None, max_wait: float | None = None
    ) -> list[Message]:
        """Send every request, then collect every reply (in request order).

        A server that stays silent — no reply and no answer to pings — for ``timeout`` seconds
        raises PeerTimeout naming it; an error reply raises the server's error class, naming
        the server. A reply that
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
            self._send((r.machine_id, r.server_id), encode(r.message, id=rid))
            pending[rid] = i
            where[rid] = (r.machine_id, r.server_id)
        return PendingReplies(self, reqs, pending, where,
                              self.timeout if timeout is None else timeout, max_wait)

    def _send(self, key: tuple[int, int], frames: list) -> None:
        """Send to server ``key``; a refused handshake or a full queue is an error that
        says which, never a send that blocks."""
        try:
            self._socks[key].send_multipart(frames, copy=False)
        except zmq.Again:
            self._raise_if_refused(key)
            raise PeerTimeout(f"{self.describe(*key)}: cannot send, no connection and its "
                              "queue is full", hint="is the server running?") from None

    def _raise_if_refused(self, key: tuple[int, int]) -> None:
        """A HandshakeError naming the server if it refused our handshake."""
        refused = self._refusal(key)
        if refused:
            raise HandshakeError(
                f"{self.describe(*key)} refused the connection ({refused}): job token "
                "mismatch, or the server belongs to another job",
                hint="every process of a job must carry its DGLCTL_TOKEN "
                     "(and the same 'encrypt' setting)") from None

    def _refusal(self, key: tuple[int, int]) -> str | None:
        """Why the server ``key`` refused our handshake, if it did."""
        mon = self._monitors[key]
        why = self._refused.get(key)
        while mon.poll(0):
            ev = zmon.recv_monitor_message(mon)
            if ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                why = f"authentication failed, status {ev['value']}"
            elif ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                why = "ZeroMQ handshake failed (an unencrypted client of an encrypted job?)"
            elif ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshakes.add(key)
            elif ev["event"] == zmq.EVENT_DISCONNECTED and key not in self._handshakes:
                # Closed before any handshake completed: an encrypted server that cannot
                # read us (another token) drops the connection without a word.
                why = why or "closed during the handshake"
        if why:
            self._refused[key] = why
        return why

    def close(self) -> None:
        for key, s in self._socks.items():
            s.disable_monitor()
            self._monitors[key].close(0)
            s.close(0)
        self._socks.clear()
        self._monitors.clear()


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

    def collect(self) -> list[Message]:
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
        errors: list[tuple[tuple[int, int], ErrorReply]] = []
        answered: set[tuple[int, int]] = set()  # servers heard from during this wait
        live = pool.liveness
        ping_every = live.ping_interval
        poll_ms = max(1, int(min(100.0, ping_every * 1000 / 2)))
        while pending:
            events = dict(poller.poll(poll_ms))
            last, now = now, time.monotonic()
            if live.stalled(now - last):
                # This process was stopped or starved: the servers' silence over that gap
                # is not theirs. Give every one a fresh window (and the barrier its time).
                started += now - last
                heard = dict.fromkeys(keys, now)
            for key in keys:
                sock = pool._socks[key]
                if sock not in events:
                    continue
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    reply, envelope = decode(frames)
                    heard[key] = now
                    answered.add(key)
                    rid = envelope.get("id")
                    if rid in pings:
                        pings.discard(rid)
                        continue
                    if rid not in pending:
                        continue  # a late reply of an abandoned request
                    idx = pending[rid]
                    if isinstance(reply, PullPiece):
                        if not self._piece(idx, reply):
                            continue  # more pieces of this reply to come
                    del pending[rid]
                    if isinstance(reply, ErrorReply):
                        errors.append((key, reply))
                    results[idx] = reply
            waiting = {where[rid] for rid in pending}
            for key in waiting:
                if now - heard[key] > timeout:
                    pool._raise_if_refused(key)
                    raise PeerTimeout(
                        f"{pool.describe(*key)} has been silent for {now - heard[key]:.1f}s "
                        f"(no reply, no answer to pings; the limit is {timeout:g}s)",
                        hint="the server process died, its host is down or unreachable, or "
                             "it was stopped for longer than the job's timeout; see its log",
                    )
            if waiting and now - started > max_wait and all(
                    k in answered and now - heard[k] <= 2 * ping_every for k in waiting):
                # Every waiting server has just answered: alive, but withholding the reply.
                # (One that has not is left to the timeout above: it may be dead.)
                names = ", ".join(pool.describe(*k) for k in sorted(waiting))
                raise PeerTimeout(
                    f"{names}: no reply to {reqs[pending[min(pending)]].message.op!r} "
                    f"within {max_wait:.0f}s although the server answers pings",
                    hint="a barrier whose other participants never arrived (a trainer died?)",
                )
            for key in waiting:
                if now - heard[key] > ping_every and now - pinged[key] > ping_every:
                    # Long waits (a barrier) stay alive while the server answers pings.
                    rid = next(pool._ids)
                    pings.add(rid)
                    pool._send(key, encode(Ping(), id=rid))
                    pinged[key] = now
        if errors:
            # Raised as the first server's error class; the message names every server.
            first = errors[0][1]
            text = "; ".join(f"{pool.describe(*key)}: {e.message}" for key, e in errors)
            raise from_wire(first.type, text, first.hint)
        return results

    def _piece(self, idx: int, piece: PullPiece) -> bool:
        """Hand one piece of a streamed reply to its request's sink; True once all arrived."""
        sink = self.reqs[idx].sink
        if sink is None:
            raise ProtocolError(f"a streamed reply to request {idx} that has no sink")
        sink(piece.row0, piece.rows)
        self.pieces[idx] = self.pieces.get(idx, 0) + 1
        return self.pieces[idx] == piece.chunks
