"""Process state of a runtime process: ``initialize``, ``exit_client``, ``get_context``.

As DGL's ``dist_context.py``: what ``initialize`` set up (the env contract, the connections to
the servers, the graphs made since) lives here, below ``DistGraph`` and ``DistTensor``, so that
both read it without importing each other. In a job started by ``dglctl launch`` the env
contract says what this process is: a server serves and exits inside ``initialize``; a trainer
connects to every server. Without the env contract the runtime runs *standalone*: one
partition, no servers, everything in process.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from partitioner.memory import retain_freed_memory

from . import error_file
from .env import RuntimeEnv, current_attempt, set_standalone_torch_env, torchelastic_error_file
from .errors import DistError
from .rpc.client import ServerPool
from .rpc.ip_config import read_ip_config
from .sampling import kernels


@dataclass
class RuntimeContext:
    """What ``initialize`` set up for this process."""

    env: RuntimeEnv | None
    pool: ServerPool | None = None
    graphs: list[Any] = field(default_factory=list)
    # Run by exit_client before the pool closes (a prefetch thread stops, its pool closes).
    on_exit: list[Callable[[], None]] = field(default_factory=list)

    @property
    def standalone(self) -> bool:
        return self.env is None

    def current_graph(self) -> Any:
        """The graph made last (DGL's tensors and splits take the partition book from it)."""
        if not self.graphs:
            raise DistError("create a DistGraph first (it supplies the partition book)")
        return self.graphs[-1]


_context: RuntimeContext | None = None
_thread = threading.local()  # a thread's own server pool (see use_thread_pool)


def use_thread_pool(pool: ServerPool | None) -> None:
    """Make ``pool`` this thread's connections to the servers (None: the process's again).

    ZeroMQ sockets belong to one thread at a time: a thread that samples or pulls beside the
    training step (the loader's prefetch) sends on connections of its own, never on the
    trainer's, whose requests may be in flight at the same moment."""
    _thread.pool = pool


def current_pool(ctx: RuntimeContext) -> ServerPool | None:
    """The server pool requests of this thread go through: its own, else ``ctx``'s."""
    pool = getattr(_thread, "pool", None)
    return pool if pool is not None else ctx.pool


def initialize(ip_config: str | None = None, **_dgl_compat: Any) -> None:
    """Start this process's part of the job (DGL's ``dgl.distributed.initialize``).

    Server processes load their partition and serve until the job ends, then exit here.
    Trainers connect to every server of the launcher's ip_config (the env contract's): an
    ``ip_config`` the script passes is accepted, as DGL's signature has it, and the
    launcher's wins, as in DGL. Without the launcher's environment, runs standalone.
    """
    global _context
    error_file.install(torchelastic_error_file())
    env = RuntimeEnv.from_environ()
    if env is not None and env.role == "server":
        # Role dispatch: only a server process loads the server (and never torch).
        from .server.graph_server import run_server

        run_server(env)
        sys.exit(0)
    # Before torch.distributed registers anything: atexit runs this last, interpreter alive.
    atexit.unregister(_collect_at_exit)  # once, however often initialize is called
    atexit.register(_collect_at_exit)
    kernels.warm_up()  # at start-up, not in the first sampling step
    # Each step's features and activations (tens of MB) reuse freed heap instead of being
    # page-faulted in again (see retain_freed_memory for the figures).
    retain_freed_memory(1 << 30, large=True)
    if env is None:
        _context = RuntimeContext(env=None)
        set_standalone_torch_env()
        return
    # As DGL's launch: the launcher's ip_config wins over the script's (``--ip_config
    # ip_config.txt`` names a file of the machine the script was written on).
    machines = read_ip_config(env.ip_config)
    pool = ServerPool(machines, env.num_servers, env.token, env.timeout,
                      client_name=f"{env.role}-{os.getpid()}", role=env.role,
                      encrypt=env.encrypt, attempt=current_attempt())
    pool.connect()
    _context = RuntimeContext(env=env, pool=pool)
    atexit.register(exit_client)


def _collect_at_exit() -> None:
    """Free the script's reference cycles (a DistributedDataParallel model holds its process
    group in one) while the interpreter is still whole. Freed later, during finalization,
    gloo's worker threads drop tensors without a Python to drop them into, and the process
    aborts ("terminate called without an active exception", exit -6) after a complete run:
    seen twice in this project's tests (torch's own atexit fix is not merged)."""
    gc.collect()


def exit_client() -> None:
    """Close this process's connections (servers exit once every client has gone)."""
    global _context
    if _context is not None:
        for fn in _context.on_exit:
            fn()
        _context.on_exit.clear()
        if _context.pool is not None:
            _context.pool.close()
    _context = None


def get_context() -> RuntimeContext:
    """The current context; standalone if ``initialize`` was not called."""
    global _context
    if _context is None:
        _context = RuntimeContext(env=None)
    return _context
