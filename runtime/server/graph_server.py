"""Graph server: holds one machine's partition in shared memory and answers typed requests.

One main server per machine loads the partition into shared memory (``ShmArena``); backup
servers map the same memory. Each server binds one ROUTER socket on its machine's data address
(never every interface) and answers the messages of ``runtime.rpc.messages``, dispatched by
type: handshake, pull/push rows of named tensors, create/delete tensors, degrees, find_edges,
neighbour sampling, sparse optimizer steps, barrier, stats, shutdown. Graph operations are
``LocalPartition``'s, the same code a co-located trainer runs. A server exits when asked, on
SIGTERM/SIGINT, or when every client that connected has gone; the main server then removes
the job's shared memory of its machine. Never imports torch.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import NoReturn

import numpy as np
import zmq
import zmq.utils.monitor as zmon

from partitioner.format import read_config
from partitioner.memory import retain_freed_memory
from partitioner.partition_book import RangePartitionBook
from partitioner.version import __version__

from ..env import RuntimeEnv
from ..errors import DistError, HandshakeError, ProtocolError
from ..rpc import messages as msg
from ..rpc.ip_config import read_ip_config
from ..rpc.liveness import Liveness
from ..rpc.security import Gate, secure_server
from ..rpc.wire import PROTOCOL_VERSION
from ..sampling import kernels
from ..store.layout import load_into_shm
from ..store.local import LocalPartition
from ..store.shm import ShmArena

log = logging.getLogger(__name__)


def _narrow(ids: np.ndarray, bound: int) -> np.ndarray:
    """Non-negative ``ids`` below ``bound`` as int32 when the bound allows: a sampling reply
    is ids only, and half its bytes is half its time on the network. Clients widen them."""
    return ids.astype(np.int32) if bound <= np.iinfo(np.int32).max + 1 else ids


class _Deferred:
    """A handler's answer when the reply is sent later (a barrier) or in pieces (a stream)."""


DEFERRED = _Deferred()


class GraphServer:
    """One server process of one machine (``server_id`` 0 is the main server)."""

    def __init__(self, env: RuntimeEnv) -> None:
        self.env = env
        self.machines = read_ip_config(env.ip_config)
        if env.machine_id >= len(self.machines):
            raise DistError(
                f"machine id {env.machine_id} is not in {env.ip_config} "
                f"({len(self.machines)} machines)"
            )
        self.machine = self.machines[env.machine_id]
        self.config = read_config(env.part_config)
        if self.config.num_parts != len(self.machines):
            raise DistError(
                f"{env.part_config} has {self.config.num_parts} parts but {env.ip_config} "
                f"lists {len(self.machines)} machines",
                hint="one machine per part",
            )
        self.book = RangePartitionBook(self.config, env.machine_id)
        self.arena = ShmArena(env.job_id, env.machine_id, root=env.shm_root)
        self.local = LocalPartition.from_shm(self.arena, self.config, self.book)
        self.is_main = env.server_id == 0
        self.policies: dict[str, str] = {}
        self.base_tensors: frozenset[str] = frozenset()  # set by load()
        # What the server holds for its clients belongs to their attempt of the job: the
        # barriers and the collective optimizer steps waiting, by (attempt, name), and the
        # clients holding each non-persistent tensor they created (freed when the last one
        # lets go, or when its attempt ends). A new attempt's first client ends the ones
        # before it: the launcher starts an attempt once the last one's trainers are gone.
        self.attempt = 0
        self.attempt_of: dict[bytes, int] = {}
        self.barriers: dict[tuple[int, str], list[tuple[bytes, int]]] = {}
        self.holders: dict[str, set[bytes]] = {}
        self.steps: dict[tuple[int, str], list[tuple[bytes, int, msg.SparseStep]]] = {}
        self.authenticated: set[bytes] = set()
        self.connected = 0  # connections open now (the live clients, ``Stats.clients``)
        self.stats = {"requests": 0, "bytes_in": 0, "bytes_out": 0, "errors": 0}
        self.cache_reports: dict[str, dict[str, list[int]]] = {}  # trainer rank -> counters
        self.started = time.time()
        self.running = True
        self.armed = False
        self.trainers_seen: set[bytes] = set()
        self.expected_trainers = env.num_trainers * len(self.machines)
        self._sock: zmq.Socket | None = None
        self._current_id = -1
        self._handlers: dict[type, Callable] = {
            msg.Ping: lambda ident, m: msg.Ack(),
            msg.Pull: self._pull,
            msg.Push: self._push,
            msg.Create: self._create,
            msg.Delete: self._delete,
            msg.Degrees: lambda ident, m: msg.DegreesReply(
                self.local.degrees(m.etype, m.ids, m.edge_dir)),
            msg.FindEdges: lambda ident, m: msg.FindEdgesReply(
                *self.local.find_edges(m.etype, m.ids)),
            msg.Sample: self._sample,
            msg.SparseStep: self._sparse_step,
            msg.CountNonzero: lambda ident, m: msg.CountNonzeroReply(
                int(np.count_nonzero(self.local.tensor(m.name)))),
            msg.WriteCountsQuery: lambda ident, m: msg.WriteCountsReply(
                self.local.writes.read(m.names) if self.local.writes is not None
                else [-1] * len(m.names)),
            msg.Barrier: self._barrier,
            msg.Stats: self._stats,
            msg.CacheReport: self._cache_report,
            msg.Shutdown: self._shutdown,
        }

    # --- set-up ------------------------------------------------------------------------------
    def load(self) -> None:
        """Main: copy the partition into shared memory. Backup: map what the main published."""
        if self.is_main:
            self.arena.cleanup()  # leftovers of a crashed run of the same job id
            manifest = load_into_shm(self.arena, self.config, self.env.machine_id)
            self.local.attach_write_counts(self.arena, create=True)
            self.arena.publish(manifest)
        else:
            manifest = self.arena.wait_manifest(self.env.timeout * 3)
            self.local.attach_write_counts(self.arena)
        for name, meta in manifest["tensors"].items():
            self.local.tensor(name)
            self.policies[name] = meta["policy"]
        self.base_tensors = frozenset(manifest["tensors"])  # the partition's own: never freed
        for etype in self.config.etypes:
            self.local.csc(etype)
            if self.config.part(self.env.machine_id).has_out_edges:
                self.local.out_csr(etype)

    def serve(self) -> None:
        """Bind, answer requests until shut down, then release everything."""
        ctx: zmq.Context = zmq.Context.instance()
        gate = Gate(ctx, self.env.token)  # before the bind: no connection before the gate
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        secure_server(sock, self.env.token, self.env.encrypt)
        # A client that reconnects (same identity) takes its old connection over at once.
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        liveness = Liveness(self.env.timeout, self.env.idle_grace)
        liveness.configure(sock)
        addr = self.machine.server_addr(self.env.server_id)
        try:
            sock.bind(addr)
        except zmq.ZMQError as e:
            sock.close(0)
            gate.close()
            raise DistError(
                f"server {self.env.server_id} of machine {self.env.machine_id} cannot listen on "
                f"{addr}: {e}",
                hint="the port is in use (another job?) or the address is not on this host",
            ) from None
        self._sock = sock
        monitor = sock.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        # A stop signal wakes the poll at once (its handler only clears ``running``): else
        # the loop sees it at the poll's next timeout, up to 200 ms into every stop.
        wake, woken = socket.socketpair()
        woken.setblocking(False)
        poller.register(wake.fileno(), zmq.POLLIN)
        seen = 0
        empty_since: float | None = None  # since when nobody is connected
        self._install_signal_handlers()
        old_wakeup = signal.set_wakeup_fd(woken.fileno(), warn_on_full_buffer=False)
        log.info("server %s/%s listening on %s", self.env.machine_id, self.env.server_id, addr)
        try:
            while self.running:
                events = dict(poller.poll(200))
                now = time.monotonic()
                if wake.fileno() in events:
                    wake.recv(4096)  # readable: the signal's byte(s), drained
                if monitor in events:
                    ev = zmon.recv_monitor_message(monitor)
                    if ev["event"] == zmq.EVENT_ACCEPTED:
                        self.connected += 1
                        seen += 1
                        empty_since = None
                    elif ev["event"] == zmq.EVENT_DISCONNECTED:
                        self.connected -= 1
                        if self.connected <= 0 and empty_since is None:
                            empty_since = now
                # Leave only after a grace with nobody connected: a paused trainer's
                # connection may drop and come back.
                if (empty_since is not None and seen > 0 and self.armed
                        and now - empty_since > liveness.idle_grace):
                    log.info("every client has gone for %.0fs; shutting down",
                             now - empty_since)
                    self.running = False
                if sock in events:
                    frames = sock.recv_multipart(copy=False)
                    self._dispatch(frames[0].bytes, frames[1:])
        finally:
            signal.set_wakeup_fd(old_wakeup)
            wake.close()
            woken.close()
            sock.disable_monitor()
            monitor.close(0)
            sock.close(0)
            gate.close()
            if self.is_main:
                self.arena.cleanup()

    def _install_signal_handlers(self) -> None:
        def stop(signum, frame):  # noqa: ARG001
            self.running = False

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop)

    # --- requests ----------------------------------------------------------------------------
    def _dispatch(self, ident: bytes, frames: list) -> None:
        self.stats["requests"] += 1
        self.stats["bytes_in"] += sum(len(f.buffer) for f in frames)
        req_id = -1
        reply: msg.Message
        try:
            request, envelope = msg.decode(frames)
            req_id = envelope.get("id", -1)
            if isinstance(request, msg.Hello):
                reply = self._hello(ident, request)
            elif ident not in self.authenticated:
                raise HandshakeError("not authenticated: send Hello with the job token first")
            else:
                handler = self._handlers.get(type(request))
                if handler is None:
                    raise ProtocolError(f"a server does not answer {request.op!r}")
                self._current_id = req_id  # for replies sent later (barrier, stream)
                reply = handler(ident, request)
                if reply is DEFERRED:
                    return
        except Exception as e:  # noqa: BLE001 - every failure goes back to the client
            self.stats["errors"] += 1
            reply = msg.ErrorReply.of(e)
        self._send(ident, req_id, reply)

    def _send(self, ident: bytes, req_id: int, reply: msg.Message) -> None:
        frames = msg.encode(reply, id=req_id)
        self.stats["bytes_out"] += sum(len(f) for f in frames)
        assert self._sock is not None
        self._sock.send_multipart([ident, *frames], copy=False)

    def _hello(self, ident: bytes, hello: msg.Hello) -> msg.HelloReply:
        if hello.version != PROTOCOL_VERSION:
            raise HandshakeError(
                f"protocol version mismatch: server speaks {PROTOCOL_VERSION} (runtime "
                f"{__version__}), client {hello.version} (runtime {hello.runtime})",
                hint="install the same dglctl version on every host")
        # (Only a peer that passed the gate with the token gets here; compared again, in
        # constant time, and a stranger is never told which job this is.)
        if not hmac.compare_digest(hello.token.encode(), self.env.token.encode()):
            raise HandshakeError("job token mismatch: this server belongs to another job")
        if hello.attempt < self.attempt and hello.role in ("trainer", "sampler"):
            raise HandshakeError(f"attempt {hello.attempt} of this job has ended (attempt "
                                 f"{self.attempt} runs now): a process of it is left over")
        if hello.attempt > self.attempt:
            self._end_attempts_before(hello.attempt)
        self.authenticated.add(ident)
        self.attempt_of[ident] = hello.attempt
        # Idle shutdown starts once the clients that hold the job have connected: every
        # trainer of the job (one that finished before another had connected would otherwise
        # end the job for it), or any other client that holds it (a tool, a test); never the
        # launcher's readiness probe.
        if hello.role == "trainer":
            self.trainers_seen.add(ident)
        if hello.keeps_server and hello.role not in ("trainer", "sampler"):
            self.armed = True
        self.armed = self.armed or len(self.trainers_seen) >= self.expected_trainers
        return msg.HelloReply(self.env.machine_id, self.env.server_id, self.env.job_id,
                              __version__)

    def _end_attempts_before(self, attempt: int) -> None:
        """Attempt ``attempt`` has begun, so the ones before it have ended: drop the barriers
        and optimizer steps their trainers left waiting (never to be answered: those callers
        are gone), free the tensors only they held (persistent ones stay), and forget their
        connections. A backup forgets the tensors it mapped, to map again what still exists."""
        old = {i for i, a in self.attempt_of.items() if a < attempt}
        dropped = [k for k in self.barriers if k[0] < attempt]
        for k in dropped:
            del self.barriers[k]
        steps = [k for k in self.steps if k[0] < attempt]
        for k in steps:
            del self.steps[k]
        freed = []
        for name in list(self.holders):
            self.holders[name] -= old
            if not self.holders[name]:
                self._free(name)
                freed.append(name)
        if not self.is_main:
            for name in [n for n in self.local.tensors if n not in self.base_tensors]:
                self.local.tensors.pop(name, None)
        for i in old:
            self.attempt_of.pop(i, None)
            self.authenticated.discard(i)
        log.info("attempt %d began: dropped %d barrier(s), %d optimizer step(s), freed %s "
                 "of the attempts before it", attempt, len(dropped), len(steps),
                 ", ".join(freed) or "no tensor")
        self.attempt = attempt

    def _free(self, name: str) -> None:
        """The main server frees non-persistent tensor ``name`` (every holder has let go)."""
        self.holders.pop(name, None)
        self.policies.pop(name, None)
        self.local.tensors.pop(name, None)
        self.arena.delete(name)

    def _pull(self, ident: bytes, m: msg.Pull):
        if not m.stream:
            return msg.PullReply(self.local.gather(m.name, m.ids))
        self._send_stream(ident, self._current_id, self.local.checked(m.name, m.ids), m.ids,
                          m.stream)
        return DEFERRED

    def _send_stream(self, ident: bytes, req_id: int, arr: np.ndarray, ids: np.ndarray,
                     piece_bytes: int) -> None:
        """Reply with the gathered rows in pieces of about the bytes the client asked for (the
        first a quarter of that), each sent as soon as it is gathered: the next gather
        overlaps the transfer of the previous piece and the client copies one piece while the
        next arrives."""
        row_bytes = max(1, arr[:1].nbytes)
        step = max(1, piece_bytes // row_bytes)
        n = len(ids)
        # A small first piece starts the transfer sooner (until it arrives the client has
        # nothing to do); with a full-size first piece the pull measured 1.12-1.39 GB/s, with
        # a quarter 1.46-1.50 GB/s (same runs, alternating).
        first = max(1, step // 4)
        bounds = [0, *range(first, n, step), n] if n > first else [0, n]
        chunks = len(bounds) - 1
        for c in range(chunks):
            lo, hi = bounds[c], bounds[c + 1]
            self._send(ident, req_id, msg.PullPiece(c, chunks, lo,
                                                    kernels.gather_rows(arr, ids[lo:hi])))

    def _push(self, ident: bytes, m: msg.Push) -> msg.Ack:
        self.local.write(m.name, m.ids, m.rows, m.mode)
        return msg.Ack()

    def _create(self, ident: bytes, m: msg.Create) -> msg.CreateReply:
        if not self.is_main:
            raise DistError("create must go to the main server (server_id 0)")
        exists = self.arena.exists(m.name)
        if exists and not m.exist_ok:
            raise DistError(f"tensor {m.name!r} already exists")
        if exists:
            have = self.local.tensor(m.name)
            want = (tuple(m.shape), np.dtype(m.dtype))
            if (have.shape, have.dtype) != want:
                raise DistError(f"tensor {m.name!r} exists with shape {have.shape} and dtype "
                                f"{have.dtype}, not {want[0]} and {want[1]}")
        else:
            self.local.tensors[m.name] = self.arena.create(m.name, tuple(m.shape), m.dtype)
        self.policies[m.name] = m.policy
        if not m.persistent and m.name not in self.base_tensors:
            self.holders.setdefault(m.name, set()).add(ident)
        return msg.CreateReply(not exists)

    def _delete(self, ident: bytes, m: msg.Delete) -> msg.Ack:
        """A trainer lets go of a tensor. The main server frees it once every trainer that
        created it has (DGL's non-persistent DistTensor); a backup forgets its mapping (it
        maps the array again if it still exists)."""
        self.local.tensors.pop(m.name, None)
        if self.is_main and m.name in self.holders:
            self.holders[m.name].discard(ident)
            if not self.holders[m.name]:
                self._free(m.name)
        return msg.Ack()

    def _sample(self, ident: bytes, m: msg.Sample) -> msg.SampleReply:
        """Sample neighbours of local seeds for several edge types in one request; reply ids
        are int32 when the graph's node and edge counts allow (see ``_narrow``)."""
        reply = msg.SampleReply()
        for i, etype in enumerate(m.etypes):
            got = self.local.sample(etype, m.seeds[i], int(m.salts[i]), int(m.fanouts[i]),
                                    bool(m.replace), int(m.seed), m.prob, m.excluded[i],
                                    m.edge_dir)
            seed_idx, nbr, eid = (
                _narrow(a, bound) for a, bound in
                zip(got, (len(m.seeds[i]), self.book.num_nodes(), self.book.num_edges()),
                    strict=True))
            reply.seed_idx.append(seed_idx)
            reply.nbrs.append(nbr)
            reply.eids.append(eid)
        return reply

    def _sparse_step(self, ident: bytes, m: msg.SparseStep):
        """Gather every trainer's share of a collective optimizer step; once all ``count``
        have come, apply the step once (each row from the mean of its gradients) and answer
        them all."""
        if not self.is_main:
            raise DistError("a sparse optimizer step must go to the main server (server_id 0)")
        key = (self.attempt_of.get(ident, 0), m.step)
        shares = self.steps.setdefault(key, [])
        shares.append((ident, self._current_id, m))
        if len(shares) < m.count:
            return DEFERRED
        del self.steps[key]
        ids = np.concatenate([s.ids for _, _, s in shares])
        row_shape = self.local.tensor(m.weight).shape[1:]  # grads travel flat
        grads = np.concatenate([s.grads.reshape(len(s.ids), *row_shape) for _, _, s in shares])
        try:
            self.local.sparse_update(m.kind, m.weight, m.states, ids, grads, m.params)
        except Exception as e:  # every trainer of the step hears the failure
            for other, req, _ in shares[:-1]:
                self._send(other, req, msg.ErrorReply.of(e))
            raise
        for other, req, _ in shares[:-1]:
            self._send(other, req, msg.Ack())
        return msg.Ack()

    def _barrier(self, ident: bytes, m: msg.Barrier):
        key = (self.attempt_of.get(ident, 0), m.name)
        waiting = self.barriers.setdefault(key, [])
        waiting.append((ident, self._current_id))
        if len(waiting) < m.count:
            return DEFERRED
        del self.barriers[key]
        for other, req in waiting[:-1]:
            self._send(other, req, msg.Ack())
        return msg.Ack()

    def _stats(self, ident: bytes, m: msg.Stats) -> msg.StatsReply:
        return msg.StatsReply(
            **self.stats, uptime=time.time() - self.started, clients=self.connected,
            machine_id=self.env.machine_id, server_id=self.env.server_id,
            tensors=sorted(self.local.tensors), caches=dict(self.cache_reports))

    def _cache_report(self, ident: bytes, m: msg.CacheReport) -> msg.Ack:
        self.cache_reports[str(m.rank)] = m.tensors  # the latest counters replace the last
        return msg.Ack()

    def _shutdown(self, ident: bytes, m: msg.Shutdown) -> msg.Ack:
        self.running = False
        return msg.Ack()


def exit_server_process(code: int) -> NoReturn:
    """End a server process that has cleaned up after itself (``run_server`` returned): flush
    its logs and standard streams, then leave without the interpreter's finalization, whose
    garbage collection over every loaded module (numba's above all) took 0.3-0.7 s of each
    server's stop. Nothing of the server is left to finalize: its sockets are closed (no
    linger) and the main server has removed the partition's shared memory."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to flush
            stream.flush()
    os._exit(code)


def run_server(env: RuntimeEnv) -> None:
    """Load, serve until shut down, clean up. Used by ``initialize`` in a server process."""
    retain_freed_memory()  # reply pieces reuse warm memory instead of faulting in new pages
    kernels.warm_up()  # sampling kernels loaded before the first request, not during it
    server = GraphServer(env)
    try:
        server.load()
    except BaseException:
        if server.is_main:  # what was copied before the failure (a backup maps, never writes)
            server.arena.cleanup()
        raise
    server.serve()
