"""The contract between the launcher and every runtime process, carried in environment variables.

The launcher (dglctl) sets these for each process it starts; the runtime reads them in
``initialize``. Nothing else crosses from the launcher to the runtime.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from .errors import EnvError

PREFIX = "DGLCTL_"
_DEVICE = re.compile(r"cpu|cuda:\d+")
ROLES = ("server", "trainer", "sampler")
DEFAULT_TIMEOUT = 10.0
DEFAULT_SHM_DIR = "/dev/shm"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class RuntimeEnv:
    """What one runtime process needs to know about its job and its place in it.

    Attributes:
        role: ``server``, ``trainer`` or ``sampler``.
        job_id: the job's id; namespaces shared memory so two jobs never collide.
        token: the job's secret; every connection must present it.
        machine_id: this host's line in ip_config.txt (= its partition id).
        ip_config: path of ip_config.txt on this host.
        part_config: path of the partition's JSON on this host.
        num_servers: servers per machine (one main, the rest backups).
        num_trainers: trainers per machine.
        num_samplers: sampler processes per trainer.
        server_id: for servers, 0 (main) .. num_servers - 1.
        timeout: seconds any wait on a peer may last before it is an error.
        barrier_timeout: seconds a barrier may wait for the other trainers (they may be
            busy for long, e.g. evaluating, while their servers answer).
        idle_grace: seconds a server stays up once every client has gone (0: three
            timeouts, so a paused trainer that reconnects finds its servers).
        shm_dir: the tmpfs holding the job's shared memory on this host.
        log_level: the runtime's logging level (``logging`` names).
        encrypt: encrypt every connection (CURVE keys from the token; ``runtime.rpc.security``).
        device: the device the launcher gave this trainer: ``cpu`` or ``cuda:N`` (N counts
            the GPUs CUDA_VISIBLE_DEVICES leaves visible); see ``runtime.device``.
        shared_gpu: other trainers of this machine train on the same GPU (more trainers
            than GPUs): DDP keeps gloo (NCCL refuses two ranks on one device).
    """

    role: str
    job_id: str
    token: str
    machine_id: int
    ip_config: str
    part_config: str
    num_servers: int = 1
    num_trainers: int = 1
    num_samplers: int = 0
    server_id: int = 0
    timeout: float = DEFAULT_TIMEOUT
    barrier_timeout: float = 600.0
    idle_grace: float = 0.0
    shm_dir: str = DEFAULT_SHM_DIR
    log_level: str = "WARNING"
    encrypt: bool = False
    device: str = "cpu"
    shared_gpu: bool = False

    def __post_init__(self) -> None:
        if not _DEVICE.fullmatch(self.device):
            raise EnvError(f"{PREFIX}DEVICE={self.device!r}: expected cpu or cuda:N")
        if self.role not in ROLES:
            raise EnvError(f"{PREFIX}ROLE={self.role!r}: expected one of {', '.join(ROLES)}")
        if not self.job_id or not all(c.isalnum() or c in "-_" for c in self.job_id):
            raise EnvError(f"{PREFIX}JOB_ID={self.job_id!r}: letters, digits, '-' and '_' only")
        for name in ("num_servers", "num_trainers"):
            if getattr(self, name) < 1:
                raise EnvError(f"{PREFIX}{name.upper()}={getattr(self, name)}: must be >= 1")
        if self.idle_grace < 0:
            raise EnvError(f"{PREFIX}IDLE_GRACE={self.idle_grace}: must be >= 0 (0: three timeouts)")
        if self.log_level.upper() not in LOG_LEVELS:
            raise EnvError(f"{PREFIX}LOG_LEVEL={self.log_level!r}: expected one of "
                           f"{', '.join(LOG_LEVELS)}")
        if not 0 <= self.server_id < self.num_servers:
            raise EnvError(
                f"{PREFIX}SERVER_ID={self.server_id}: must be below NUM_SERVERS={self.num_servers}"
            )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None,
                     overrides: Mapping[str, str] | None = None) -> RuntimeEnv | None:
        """Read the contract from ``environ`` (default: this process's environment) with
        ``overrides`` (``DGLCTL_*`` keys) on top; None when no role is set (standalone mode,
        no launcher)."""
        env = {**(os.environ if environ is None else environ), **(overrides or {})}
        if f"{PREFIX}ROLE" not in env:
            return None
        values: dict[str, object] = {}
        for f in fields(cls):
            key = PREFIX + f.name.upper()
            if key not in env:
                if f.default is not MISSING:
                    continue
                raise EnvError(f"{key} is not set", hint="processes must be started by dglctl launch")
            raw = env[key]
            try:
                if f.type == "bool":
                    values[f.name] = _flag(key, raw)
                    continue
                values[f.name] = (
                    int(raw) if f.type == "int" else float(raw) if f.type == "float" else raw
                )
            except ValueError:
                raise EnvError(f"{key}={raw!r} is not a valid {f.type}") from None
        return cls(**values)  # type: ignore[arg-type]

    @property
    def shm_root(self) -> Path:
        """The folder of this host's shared memory (``shm_dir``)."""
        return Path(self.shm_dir)

    def to_environ(self) -> dict[str, str]:
        """The variables that reproduce this contract in a child process."""
        return {PREFIX + f.name.upper(): str(getattr(self, f.name)) for f in fields(self)}


def _flag(key: str, raw: str) -> bool:
    """A boolean variable: 1/true/yes or 0/false/no (any case)."""
    if raw.lower() in ("1", "true", "yes"):
        return True
    if raw.lower() in ("0", "false", "no", ""):
        return False
    raise EnvError(f"{key}={raw!r}: expected 1/true/yes or 0/false/no")


def current_attempt(environ: Mapping[str, str] | None = None) -> int:
    """This process's attempt of its job: torchrun's ``TORCHELASTIC_RESTART_COUNT``, which the
    launcher sets for each attempt's trainers (0 without it)."""
    raw = (os.environ if environ is None else environ).get("TORCHELASTIC_RESTART_COUNT", "0")
    try:
        attempt = int(raw or 0)
    except ValueError:
        raise EnvError(f"TORCHELASTIC_RESTART_COUNT={raw!r} is not an integer") from None
    if attempt < 0:
        raise EnvError(f"TORCHELASTIC_RESTART_COUNT={raw!r}: must be >= 0")
    return attempt


def torch_rank_world(rank: int | None = None) -> tuple[int, int]:
    """This trainer's rank and the number of trainers: torch.distributed's when it is set up,
    else torchrun's RANK and WORLD_SIZE variables (0 and 1 without them)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return (dist.get_rank() if rank is None else rank), dist.get_world_size()
    world = int(os.environ.get("WORLD_SIZE", 1))
    return (int(os.environ.get("RANK", 0)) if rank is None else rank), world


def set_standalone_torch_env() -> None:
    """Let ``init_process_group`` work unchanged in standalone mode: a world of one."""
    import socket

    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")



def local_rank() -> int:
    """This trainer's rank on its host (torchrun's ``LOCAL_RANK``; 0 without it)."""
    return int(os.environ.get("LOCAL_RANK", 0))


def feature_cache_bytes() -> int:
    """The bytes a trainer may keep of copies of other machines' feature rows
    (``DGLCTL_FEATURE_CACHE_GB``, from the cluster's ``feature_cache_gb``; default 0: none)."""
    key = PREFIX + "FEATURE_CACHE_GB"
    raw = os.environ.get(key, "0")
    try:
        gb = float(raw)
    except ValueError:
        raise EnvError(f"{key}={raw!r} is not a number of GB") from None
    if gb < 0:
        raise EnvError(f"{key}={raw!r}: must be >= 0")
    return int(gb * 1e9)


def loader_prefetch() -> bool:
    """Whether loaders make batches ahead on a prefetch thread by default: ``DGLCTL_PREFETCH``
    (default on; ``0`` turns it off without changing the script)."""
    key = PREFIX + "PREFETCH"
    return _flag(key, os.environ.get(key, "1"))


def torchelastic_error_file() -> str | None:
    """Where this process records an uncaught exception (torchrun's ``TORCHELASTIC_ERROR_FILE``
    convention; the launcher sets it per trainer), or None."""
    return os.environ.get("TORCHELASTIC_ERROR_FILE") or None
