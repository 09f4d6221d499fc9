"""Graph server: holds one machine's partition in shared memory and answers requests over ZeroMQ.

One main server per machine loads the partition into shared memory (``ShmArena``); backup
servers map the same memory. Each server binds one ROUTER socket on its machine's data address
(never every interface) and serves: handshake, pull/push rows of named tensors, create/delete
tensors, in/out degrees, find_edges, neighbour sampling (in- and out-edges), barrier, stats,
shutdown. A server exits when asked, on SIGTERM/SIGINT, or when every client that connected
has gone; the main server then removes the job's shared memory of its machine.

Run directly for tests or by hand: ``python -m runtime.server`` reads the env contract.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

import numpy as np
import zmq
import zmq.utils.monitor as zmon

from partitioner.format import load_array, read_config
from partitioner.graph import parse_etype_key
from partitioner.loader import load_partition
from partitioner.parallel import retain_freed_memory
from partitioner.partition_book import RangePartitionBook

from . import __version__, kernels
from .env import RuntimeEnv
from .errors import DistError
from .ip_config import read_ip_config
from .sampling import sample_on_part
from .shm import ShmArena
from .sparse_update import apply_update
from .wire import PROTOCOL_VERSION, pack, unpack

log = logging.getLogger(__name__)

HEARTBEAT_MS = 1000


class _Stream:
    """A pull reply sent as several messages (see ``GraphServer._send_stream``)."""

    __slots__ = ("arr", "ids", "piece_bytes")

    def __init__(self, arr: np.ndarray, ids: np.ndarray, piece_bytes: int) -> None:
        self.arr, self.ids, self.piece_bytes = arr, ids, piece_bytes


def _narrow(ids: np.ndarray, bound: int) -> np.ndarray:
    """Non-negative ``ids`` below ``bound`` as int32 when the bound allows: a sampling reply
    is ids only, and half its bytes is half its time on the network. Clients widen them."""
    return ids.astype(np.int32) if bound <= np.iinfo(np.int32).max + 1 else ids


def graph_tensor(etype: str, what: str) -> str:
    """Shared-array name of a part's graph component of ``etype``: ``indptr`` or ``indices`` of
    the CSC, ``out_indptr``, ``out_indices`` or ``out_eids`` of the out-CSR."""
    return f"graph:{etype}:{what}"


OUT_CSR = ("out_indptr", "out_indices", "out_eids")


def orig_tensor(ntype: str) -> str:
    """Shared-array name of the input ids of a machine's owned nodes of ``ntype``."""
    return f"orig:{ntype}"


def load_into_shm(arena: ShmArena, config: dict[str, Any], machine_id: int) -> dict[str, Any]:
    """Copy the machine's partition into shared memory; return the manifest describing it."""
    part = load_partition(config, machine_id)
    tensors: dict[str, dict[str, Any]] = {}
    book = part.book
    for ntype, rel in config["orig_nids"].items():
        t = book.nodes.type_index(ntype)
        lo, hi = book.nodes.typed_start[machine_id, t], book.nodes.typed_start[machine_id + 1, t]
        arena.put(orig_tensor(ntype), np.asarray(load_array(config, rel)[lo:hi]))
    for etype in config["etypes"]:
        indptr, indices = part.csc(etype)
        for what, arr in (("indptr", indptr), ("indices", indices)):
            arena.put(graph_tensor(etype, what), np.asarray(arr))
        if part.has_out_edges:
            for what, arr in zip(OUT_CSR, part.csr(etype), strict=True):
                arena.put(graph_tensor(etype, what), np.asarray(arr))
    for key, arr in part.node_feats().items():
        ntype = key.split("/", 1)[0]
        arena.put(key, np.asarray(arr))
        tensors[key] = {"policy": f"node:{ntype}", "dtype": arr.dtype.str, "shape": list(arr.shape[1:])}
    for key, arr in part.edge_feats().items():
        etype = key.rsplit("/", 1)[0]
        arena.put(key, np.asarray(arr))
        tensors[key] = {"policy": f"edge:{etype}", "dtype": arr.dtype.str, "shape": list(arr.shape[1:])}
    return {"tensors": tensors, "pid": os.getpid(), "time": time.time()}


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
        if self.config["num_parts"] != len(self.machines):
            raise DistError(
                f"{env.part_config} has {self.config['num_parts']} parts but {env.ip_config} "
                f"lists {len(self.machines)} machines",
                hint="one machine per part",
            )
        self.book = RangePartitionBook(self.config, env.machine_id)
        self.arena = ShmArena(env.job_id, env.machine_id)
        self.is_main = env.server_id == 0
        self.tensors: dict[str, np.ndarray] = {}
        self.policies: dict[str, str] = {}
        self.barriers: dict[str, list[tuple[bytes, int]]] = {}
        self.authenticated: set[bytes] = set()
        self.stats = {"requests": 0, "bytes_in": 0, "bytes_out": 0, "errors": 0}
        self.started = time.time()
        self.running = True
        self.armed = False
        self.csc: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.csr: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    # --- set-up ------------------------------------------------------------------------------
    def load(self) -> None:
        """Main: copy the partition into shared memory. Backup: map what the main published."""
        if self.is_main:
            self.arena.cleanup()  # leftovers of a crashed run of the same job id
            manifest = load_into_shm(self.arena, self.config, self.env.machine_id)
            self.arena.publish(manifest)
        else:
            manifest = self.arena.wait_manifest(self.env.timeout * 3)
        for name, meta in manifest["tensors"].items():
            self.tensors[name] = self.arena.attach(name)
            self.policies[name] = meta["policy"]
        has_out = "csr" in self.config[f"part-{self.env.machine_id}"]
        for etype in self.config["etypes"]:
            self.csc[etype] = (
                self.arena.attach(graph_tensor(etype, "indptr"), writable=False),
                self.arena.attach(graph_tensor(etype, "indices"), writable=False),
            )
            if has_out:
                self.csr[etype] = tuple(  # type: ignore[assignment]
                    self.arena.attach(graph_tensor(etype, w), writable=False) for w in OUT_CSR)

    def serve(self) -> None:
        """Bind, answer requests until shut down, then release everything."""
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_MS * 3)
        addr = self.machine.server_addr(self.env.server_id)
        try:
            sock.bind(addr)
        except zmq.ZMQError as e:
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
        connected, seen = 0, 0
        self._install_signal_handlers()
        log.info("server %s/%s listening on %s", self.env.machine_id, self.env.server_id, addr)
        try:
            while self.running:
                events = dict(poller.poll(200))
                if monitor in events:
                    ev = zmon.recv_monitor_message(monitor)
                    if ev["event"] == zmq.EVENT_ACCEPTED:
                        connected += 1
                        seen += 1
                    elif ev["event"] == zmq.EVENT_DISCONNECTED:
                        connected -= 1
                        if connected <= 0 and seen > 0 and self.armed:
                            log.info("every client has gone; shutting down")
                            self.running = False
                if sock in events:
                    frames = sock.recv_multipart(copy=False)
                    self._dispatch(sock, frames[0].bytes, frames[1:])
        finally:
            sock.disable_monitor()
            monitor.close(0)
            sock.close(0)
            if self.is_main:
                self.arena.cleanup()

    def _install_signal_handlers(self) -> None:
        def stop(signum, frame):  # noqa: ARG001
            self.running = False

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, stop)

    # --- requests ----------------------------------------------------------------------------
    def _dispatch(self, sock: zmq.Socket, ident: bytes, frames: list) -> None:
        self.stats["requests"] += 1
        self.stats["bytes_in"] += sum(len(f.buffer) for f in frames)
        req_id = -1
        try:
            header, arrays = unpack(frames)
            req_id = header.get("id", -1)
            op = header.get("op")
            if op == "hello":
                reply, out = self._hello(ident, header)
            elif ident not in self.authenticated:
                raise DistError("not authenticated: send 'hello' with the job token first")
            else:
                handler = getattr(self, f"_op_{op}", None)
                if handler is None:
                    raise DistError(f"unknown operation {op!r}")
                result = handler(ident, header, arrays)
                if result is None:  # deferred reply (barrier)
                    return
                if isinstance(result, _Stream):
                    self._send_stream(sock, ident, req_id, result)
                    return
                reply, out = result
        except Exception as e:  # noqa: BLE001 - every failure goes back to the client
            self.stats["errors"] += 1
            reply, out = {"error": f"{type(e).__name__}: {e}"}, []
        self._send(sock, ident, req_id, reply, out)

    def _send(self, sock, ident: bytes, req_id: int, reply: dict, out: list) -> None:
        reply["id"] = req_id
        frames = pack(reply, out)
        self.stats["bytes_out"] += sum(len(f) for f in frames)
        sock.send_multipart([ident, *frames], copy=False)

    def _send_stream(self, sock, ident: bytes, req_id: int, stream: _Stream) -> None:
        """Reply with the gathered rows in pieces of about the bytes the client asked for (the
        first a quarter of that), each sent as soon as it is gathered: the next gather
        overlaps the transfer of the previous piece and the client copies one piece while the
        next arrives."""
        row_bytes = max(1, stream.arr[:1].nbytes)
        step = max(1, stream.piece_bytes // row_bytes)
        n = len(stream.ids)
        # A small first piece starts the transfer sooner (until it arrives the client has
        # nothing to do); with a full-size first piece the pull measured 1.12-1.39 GB/s, with a quarter
        # 1.46-1.50 GB/s (same runs, alternating).
        first = max(1, step // 4)
        bounds = [0, *range(first, n, step), n] if n > first else [0, n]
        chunks = len(bounds) - 1
        for c in range(chunks):
            lo, hi = bounds[c], bounds[c + 1]
            self._send(sock, ident, req_id, {"chunk": c, "chunks": chunks, "row0": lo},
                       [kernels.gather_rows(stream.arr, stream.ids[lo:hi])])

    def _hello(self, ident: bytes, header: dict) -> tuple[dict, list]:
        if header.get("version") != PROTOCOL_VERSION:
            raise DistError(
                f"protocol version mismatch: server speaks {PROTOCOL_VERSION} (runtime "
                f"{__version__}), client {header.get('version')} (runtime {header.get('runtime')})"
            )
        if header.get("token") != self.env.token:
            raise DistError(f"job token mismatch: this server belongs to job {self.env.job_id}")
        self.authenticated.add(ident)
        # Idle shutdown starts once a client that holds the job (a trainer or sampler, not
        # the launcher's readiness probe) has connected.
        self.armed = self.armed or bool(header.get("keeps_server", True))
        return {"machine_id": self.env.machine_id, "server_id": self.env.server_id,
                "job_id": self.env.job_id, "runtime": __version__}, []

    def _tensor(self, name: str) -> np.ndarray:
        arr = self.tensors.get(name)
        if arr is None:
            if not self.arena.exists(name):
                raise DistError(f"no tensor named {name!r} on machine {self.env.machine_id}")
            arr = self.tensors[name] = self.arena.attach(name)
        return arr

    def _op_ping(self, ident, header, arrays):
        return {}, []

    def _op_pull(self, ident, header, arrays):
        arr, ids = self._tensor(header["name"]), arrays[0]
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= len(arr)):
            raise DistError(f"row ids of {header['name']!r} outside [0, {len(arr)}) on machine "
                            f"{self.env.machine_id}")
        if not header.get("stream"):
            return {}, [kernels.gather_rows(arr, ids)]
        return _Stream(arr, ids, int(header["stream"]))

    def _op_push(self, ident, header, arrays):
        arr = self._tensor(header["name"])
        ids, data = arrays
        if header.get("mode", "set") == "add":
            np.add.at(arr, ids, data)
        else:
            arr[ids] = data
        return {}, []

    def _op_create(self, ident, header, arrays):
        if not self.is_main:
            raise DistError("create must go to the main server (server_id 0)")
        name = header["name"]
        exists = self.arena.exists(name)
        if exists and not header.get("exist_ok", False):
            raise DistError(f"tensor {name!r} already exists")
        if exists:
            have = self._tensor(name)
            want = (tuple(header["shape"]), np.dtype(header["dtype"]))
            if (have.shape, have.dtype) != want:
                raise DistError(f"tensor {name!r} exists with shape {have.shape} and dtype "
                                f"{have.dtype}, not {want[0]} and {want[1]}")
        else:
            self.tensors[name] = self.arena.create(name, tuple(header["shape"]), header["dtype"])
        self.policies[name] = header["policy"]
        return {"created": not exists}, []

    def _op_delete(self, ident, header, arrays):
        self.tensors.pop(header["name"], None)
        self.arena.delete(header["name"])
        return {}, []

    def _op_in_degrees(self, ident, header, arrays):
        indptr, _ = self.csc[header["etype"]]
        ids = arrays[0]
        return {}, [np.asarray(indptr[ids + 1] - indptr[ids])]

    def _out_csr(self, etype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        csr = self.csr.get(etype)
        if csr is None:
            raise DistError(
                f"machine {self.env.machine_id} holds no out-edges of {etype!r}: the partition "
                "was written with --no-out-edges",
                hint="re-run 'dglctl partition' without --no-out-edges",
            )
        return csr

    def _op_out_degrees(self, ident, header, arrays):
        indptr = self._out_csr(header["etype"])[0]
        ids = arrays[0]
        return {}, [np.asarray(indptr[ids + 1] - indptr[ids], dtype=np.int64)]

    def _op_find_edges(self, ident, header, arrays):
        etype = header["etype"]
        indptr, indices = self.csc[etype]
        local = arrays[0]
        src = np.asarray(indices[local])
        dst_local = np.searchsorted(indptr, local, side="right") - 1
        dst_type = parse_etype_key(etype)[2]
        dst_pt = dst_local + self.book.nodes.typed_start[self.env.machine_id,
                                                          self.book.nodes.type_index(dst_type)]
        return {}, [src, self.book.map_to_homo_nid(dst_pt, dst_type)]

    def _op_sample(self, ident, header, arrays):
        """Sample neighbours of local seeds for several edge types in one request.

        ``edge_dir`` "in" (default): arrays per edge type are local seeds (destination type)
        and excluded CSC positions; the reply per edge type is seed index, homogeneous source
        id, CSC position. "out": local seeds (source type) and excluded homogeneous edge ids;
        the reply is seed index, homogeneous destination id, homogeneous edge id. Reply ids
        are int32 when the graph's node and edge counts allow (see ``_narrow``).
        """
        out = []
        prob = header.get("prob")
        edge_dir = header.get("edge_dir", "in")
        if edge_dir not in ("in", "out"):
            raise DistError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
        if edge_dir == "out" and prob:
            raise DistError("prob= is not supported with edge_dir='out'")
        for i, etype in enumerate(header["etypes"]):
            seeds, excluded = arrays[2 * i], arrays[2 * i + 1]
            if edge_dir == "out":
                indptr, indices, eids = self._out_csr(etype)
                seed_type = parse_etype_key(etype)[0]
            else:
                (indptr, indices), eids = self.csc[etype], None
                seed_type = parse_etype_key(etype)[2]
            key_ids = kernels.gather_rows(self._tensor(orig_tensor(seed_type)), seeds)
            weights = self._tensor(f"{etype}/{prob}") if prob else None
            got = sample_on_part(indptr, indices, seeds, key_ids, int(header["salts"][i]),
                                 int(header["fanouts"][i]), bool(header.get("replace")),
                                 int(header["seed"]), weights,
                                 excluded if len(excluded) else None, eids)
            # seed index, node id, edge id (or CSC position): each below its bound
            bounds = (len(seeds), self.book.num_nodes(), self.book.num_edges())
            out += [_narrow(a, bound) for a, bound in zip(got, bounds, strict=True)]
        return {}, out

    def _op_sparse_update(self, ident, header, arrays):
        """Apply an optimizer step to rows of an embedding table held by this machine."""
        weight = self._tensor(header["weight"])
        states = [self._tensor(n) for n in header["states"]]
        apply_update(header["kind"], weight, states, arrays[0], arrays[1], header["params"])
        return {}, []

    def _op_barrier(self, ident, header, arrays):
        name, count = header["name"], int(header["count"])
        waiting = self.barriers.setdefault(name, [])
        waiting.append((ident, header.get("id", -1)))
        if len(waiting) < count:
            return None
        del self.barriers[name]
        for other, req in waiting[:-1]:
            self._send(self._sock, other, req, {}, [])
        return {}, []

    def _op_stats(self, ident, header, arrays):
        return {**self.stats, "uptime": time.time() - self.started,
                "clients": len(self.authenticated), "machine_id": self.env.machine_id,
                "server_id": self.env.server_id, "tensors": sorted(self.tensors)}, []

    def _op_shutdown(self, ident, header, arrays):
        self.running = False
        return {}, []


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


def _parse_args(argv: list[str] | None) -> RuntimeEnv:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m runtime.server",
        description="Run one graph server. Values come from the DGLCTL_* environment (what "
                    "'dglctl launch' sets); options override them. The job token is read from "
                    "DGLCTL_TOKEN or --token-file, never from the command line (ps shows it).")
    p.add_argument("--ip-config")
    p.add_argument("--part-config")
    p.add_argument("--machine-id", type=int)
    p.add_argument("--server-id", type=int)
    p.add_argument("--num-servers", type=int)
    p.add_argument("--job-id")
    p.add_argument("--token-file")
    p.add_argument("--timeout", type=float)
    args = p.parse_args(argv)
    environ = dict(os.environ)
    environ.setdefault("DGLCTL_ROLE", "server")
    for key in ("ip_config", "part_config", "machine_id", "server_id", "num_servers", "job_id",
                "timeout"):
        value = getattr(args, key)
        if value is not None:
            environ[f"DGLCTL_{key.upper()}"] = str(value)
    if args.token_file:
        environ["DGLCTL_TOKEN"] = open(args.token_file).read().strip()
    env = RuntimeEnv.from_environ(environ)
    assert env is not None
    return env


def main(argv: list[str] | None = None) -> int:
    """``python -m runtime.server``: run one server from the env contract and options."""
    logging.basicConfig(level=os.environ.get("DGLCTL_LOG", "WARNING"),
                        format="%(asctime)s %(name)s %(message)s")
    try:
        env = _parse_args(argv)
        if env.role != "server":
            raise DistError(f"DGLCTL_ROLE is {env.role!r}; this entry point runs servers")
        run_server(env)
    except DistError as e:
        print(f"runtime.server: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"runtime.server: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
