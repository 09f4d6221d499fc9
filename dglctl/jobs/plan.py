"""The launch plan, computed without I/O: cluster config + launch options + what preflight
found -> a ``JobPlan`` of every process's host, role, rank, name, argv, env and ports.

``launch`` executes a plan (``jobs.launcher``); ``launch --dry-run`` prints one. The env of each
process is the runtime's contract (``runtime.env.RuntimeEnv``) plus, for trainers,
torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_ERROR_FILE), an OMP_NUM_THREADS
default from the host's cores, and GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME naming the
interface of the host's data address (``hosts/netif.py`` says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import ClusterConfig, Host
from ..errors import ConfigError
from ..hosts.transport import join_path

if TYPE_CHECKING:  # the CLI starts without numpy: partitioner is imported where it is used
    from partitioner.format import PartConfig

PORT_SEARCH = 200  # ports above the base that preflight probes for a free block
TOKEN_VAR = "DGLCTL_TOKEN"
# What DDP's gloo and NCCL read for the interface of their own connections; the cluster
# YAML's env wins over the launcher's default.
SOCKET_IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
# The contract's fields the launcher decides; the others (shm_dir, log_level, barrier_timeout,
# ...) are tunables a cluster config may set in its ``env:`` as DGLCTL_<FIELD>.
JOB_FIELDS = ("role", "job_id", "token", "machine_id", "ip_config", "part_config",
              "num_servers", "num_trainers", "num_samplers", "server_id", "timeout",
              "encrypt", "device", "shared_gpu")


@dataclass(frozen=True)
class LaunchOptions:
    """What ``dglctl launch`` was asked to run (beyond the cluster config)."""

    script: Path | None  # None with ``module``
    script_args: tuple[str, ...]
    part_config: Path
    detach: bool = False
    port_base_explicit: bool = False
    module: str | None = None  # ``-m package.module``: run a module of the project
    workdir: Path | None = None  # the project folder shipped [default: SCRIPT's, or here]

    @property
    def project_root(self) -> Path:
        """The folder shipped to every host."""
        if self.workdir is not None:
            return self.workdir
        return self.script.parent if self.script is not None else Path.cwd()

    @property
    def entry(self) -> str:
        """What runs, in words: the script's path, or ``-m MODULE``."""
        return f"-m {self.module}" if self.module else str(self.script)


@dataclass(frozen=True)
class ProcSpec:
    """One process to start: where, as what, and with which argv, env and port."""

    name: str
    host: int  # index into the plan's hosts (= machine id = partition id)
    host_name: str
    role: str  # "server" or "trainer"
    rank: int  # server id for servers, global rank for trainers
    local_rank: int  # index of the process among those of its role on its host
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    port: int | None = None  # the port it listens on (a server's; trainer 0's MASTER_PORT)

    @property
    def label(self) -> str:
        """``[host role rank]``, the prefix of its log lines."""
        return f"[{self.host_name} {self.role} {self.rank}]"

    def public_env(self) -> dict[str, str]:
        """The env without the job token (what may be printed)."""
        return {k: v for k, v in self.env.items() if k != TOKEN_VAR}


ATTEMPT_SUFFIX = "-attempt"  # trainer-1-0 restarted the first time: trainer-1-0-attempt1


def first_attempt_name(name: str) -> str:
    """The name the process of ``name`` had in the job's first attempt (``attempt_spec``)."""
    return name.split(ATTEMPT_SUFFIX, 1)[0]


def attempt_spec(spec: ProcSpec, attempt: int) -> ProcSpec:
    """``spec`` (a process of the first attempt) as started for attempt ``attempt`` (>= 1) of
    a restarted job: its own name (so its log, exit status and error file are its own), and
    for a trainer ``TORCHELASTIC_RESTART_COUNT``; the same rank, host and command."""
    if attempt == 0:
        return spec
    name = f"{spec.name}{ATTEMPT_SUFFIX}{attempt}"
    env = dict(spec.env)
    if "TORCHELASTIC_RESTART_COUNT" in env:
        env["TORCHELASTIC_RESTART_COUNT"] = str(attempt)
    if "TORCHELASTIC_ERROR_FILE" in env:
        folder = env["TORCHELASTIC_ERROR_FILE"].rsplit("/", 1)[0]
        env["TORCHELASTIC_ERROR_FILE"] = f"{folder}/{name}.error.json"
    return replace(spec, name=name, env=env)


@dataclass(frozen=True)
class HostPlan:
    """One host of the plan and the paths the job uses on it."""

    index: int
    name: str
    address: str
    data_address: str
    workspace: str
    python: str
    files: tuple[str, ...]  # partition files (relative to the partition folder) it needs
    bytes_needed: int
    job_dir: str
    data_dir: str
    part_config: str
    ip_config: str
    work_dir: str  # the project's copy, the trainers' working folder


@dataclass(frozen=True)
class JobPlan:
    """Everything a launch starts, resolved per host and per process."""

    job_id: str
    graph_name: str
    script: str
    hosts: tuple[HostPlan, ...]
    procs: tuple[ProcSpec, ...]
    port_base: int
    master_addr: str
    master_port: int
    world_size: int
    shm_dir: str
    ip_config: tuple[tuple[str, int], ...]  # ip_config.txt's lines: (data address, port base)

    @property
    def servers(self) -> tuple[ProcSpec, ...]:
        """The graph servers, host by host."""
        return tuple(p for p in self.procs if p.role == "server")

    @property
    def trainers(self) -> tuple[ProcSpec, ...]:
        """The trainers, by rank."""
        return tuple(p for p in self.procs if p.role == "trainer")

    def describe(self) -> dict[str, Any]:
        """The plan as JSON-ready data, without the job token; a data address that preflight
        learns from the host (FROM_HOST, in a dry run) is null."""
        return {
            "job_id": self.job_id, "graph_name": self.graph_name, "script": self.script,
            "port_base": self.port_base, "master_addr": self.master_addr or None,
            "master_port": self.master_port, "world_size": self.world_size,
            "shm_dir": self.shm_dir,
            "ip_config": [[a or None, p] for a, p in self.ip_config],
            "hosts": [{"index": h.index, "name": h.name, "address": h.address,
                       "data_address": h.data_address or None, "workspace": h.workspace,
                       "python": h.python, "files": len(h.files),
                       "bytes_needed": h.bytes_needed} for h in self.hosts],
            "processes": [{"name": p.name, "host": p.host_name, "role": p.role, "rank": p.rank,
                           "local_rank": p.local_rank, "argv": list(p.argv), "cwd": p.cwd,
                           "port": p.port, "env": p.public_env()} for p in self.procs],
        }


def select_hosts(cluster: ClusterConfig, num_parts: int, part_path: str) -> tuple[Host, ...]:
    """The first ``num_parts`` hosts (host i serves part i); too few hosts is a config error."""
    if num_parts > len(cluster.hosts):
        raise ConfigError(
            f"{part_path} has {num_parts} parts but {cluster.path} lists "
            f"{len(cluster.hosts)} host(s)",
            hint="one host per part: add hosts, or re-partition with --num-parts "
                 f"{len(cluster.hosts)}")
    return cluster.hosts[:num_parts]


def host_files(part_config: PartConfig, i: int) -> tuple[str, ...]:
    """The partition files host ``i`` needs: its part's and the shared ones.

    Each is copied to the same path under the host's data folder, so each must be a safe
    relative path (a PartitionFormatError names the config, the key and the path)."""
    from partitioner.paths import FILES_KEY, path_problem, refuse

    files = tuple(part_config.files)
    for rel in files:
        why = path_problem(rel)
        if why is not None:
            raise refuse(part_config.where, FILES_KEY, rel, why)
    return tuple(rel for rel in files
                 if rel.startswith(f"part{i}/") or not rel.startswith("part"))


def graph_name(part_config: PartConfig) -> str:
    """The partition's graph name, once it is safe in host paths (``data/NAME/NAME.json``)."""
    from partitioner.paths import name_problem, refuse

    name = part_config.graph_name
    why = name_problem(name)
    if why is not None:
        raise refuse(part_config.where, "['graph_name']", name, why)
    return name


def host_bytes(part_config: PartConfig, i: int) -> int:
    """Bytes of the partition files host ``i`` needs."""
    files = part_config.files
    return sum(files[rel]["size"] for rel in host_files(part_config, i))


def preflight_ports(cluster: ClusterConfig) -> list[int]:
    """The ports preflight asks each host about: the base and the search range above it."""
    base = cluster.port_base
    return list(range(base, base + cluster.servers_per_host + PORT_SEARCH))


def choose_ports(cluster: ClusterConfig, busy: Iterable[int],
                 explicit: bool = False) -> tuple[int, int] | None:
    """``(port base, MASTER_PORT)``: the configured base if its block is free on every host,
    else (unless the base was given on the command line) the next free block, so two jobs on
    the same hosts do not collide. None when no block is free.

    A block is the servers' ports (base .. base + servers_per_host - 1), then MASTER_PORT.
    """
    base, k = cluster.port_base, cluster.servers_per_host
    taken = set(busy)
    candidates = [base] if explicit else range(base, base + PORT_SEARCH - k, k + 1)
    for b in candidates:
        if not taken & set(range(b, b + k + 1)):
            return b, b + k
    return None


def busy_ports_problem(cluster: ClusterConfig, busy_per_host: Mapping[str, Iterable[int]]) -> str:
    """The preflight problem when no port block is free: which host holds which server port."""
    servers = set(range(cluster.port_base, cluster.port_base + cluster.servers_per_host))
    detail = "; ".join(f"host {h}: port(s) {', '.join(map(str, sorted(servers & set(p))))} in use"
                       for h, p in busy_per_host.items() if servers & set(p))
    return detail or "no free server ports found"


def runtime_environ(cluster: ClusterConfig, **job: Any) -> dict[str, str]:
    """The runtime contract's variables for one process: ``job`` gives the launcher's fields
    (JOB_FIELDS), the cluster's ``env:`` any tunable (DGLCTL_SHM_DIR, DGLCTL_LOG_LEVEL, ...)."""
    from runtime.env import PREFIX, RuntimeEnv
    from runtime.errors import EnvError

    unknown = set(job) - set(JOB_FIELDS)
    if unknown:
        raise TypeError(f"not launcher fields of the runtime contract: {sorted(unknown)}")
    own = {PREFIX + k.upper(): str(v) for k, v in job.items()}
    try:
        env = RuntimeEnv.from_environ(cluster.env, overrides=own)
    except EnvError as e:  # a bad tunable in the cluster's env: name the file
        raise ConfigError(f"{cluster.path}: env: {e.message}", hint=e.hint) from None
    assert env is not None  # the role is always set
    return env.to_environ()


def torchrun_environ(*, rank: int, local_rank: int, world: int, local_world: int, group: int,
                     groups: int, master_addr: str, master_port: int, run_id: str,
                     error_file: str, max_restarts: int = 0) -> dict[str, str]:
    """What torchrun gives each worker, for a trainer of rank ``rank`` on host ``group``."""
    return {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(local_world), "GROUP_RANK": str(group),
            "GROUP_WORLD_SIZE": str(groups), "ROLE_NAME": "trainer", "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(world), "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(master_port), "TORCHELASTIC_RUN_ID": run_id,
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": str(max_restarts),
            "TORCHELASTIC_ERROR_FILE": error_file, "PYTHONUNBUFFERED": "1"}


def trainer_device(cluster: ClusterConfig, local_rank: int, rank: int) -> str:
    """The device of trainer ``rank`` (``local_rank`` on its host): ``cuda:LOCAL_RANK``
    (round robin when a host has more trainers than GPUs, as DGL's examples' ``rank %
    num_gpus``), ``cpu`` without GPUs. On the local transport every host is this machine,
    whose GPUs the hosts share: ``cuda:RANK`` (round robin)."""
    gpus = cluster.gpus_per_host
    if not gpus:
        return "cpu"
    return f"cuda:{(rank if cluster.transport == 'local' else local_rank) % gpus}"


def gpus_shared(cluster: ClusterConfig, hosts: int) -> bool:
    """Whether some GPU has several trainers (more trainers on a machine than GPUs): NCCL
    refuses two ranks on one device, so such trainers keep gloo for DDP."""
    per_machine = cluster.trainers_per_host * (hosts if cluster.transport == "local" else 1)
    return 0 < cluster.gpus_per_host < per_machine


def omp_threads(cluster: ClusterConfig, cores: int | None) -> int | None:
    """Each trainer's OMP_NUM_THREADS on a host with ``cores`` usable CPUs: what is left after
    one core per server and per sampler process, shared by the trainers (at least 1; DGL's
    launch.py gives half the launching machine's cores to the trainers). None: unknown."""
    if cores is None:
        return None
    tph = cluster.trainers_per_host
    others = cluster.servers_per_host + tph * cluster.samplers_per_trainer
    return max(1, (cores - others) // tph)


def prefetch_without_core(cluster: ClusterConfig, hosts: int, cores: int | None) -> bool:
    """Whether a trainer's prefetch thread would find no idle core: on the local transport
    every host is this machine, and its ``cores`` are all taken by the job's servers,
    trainers and sampler processes (one core each). The thread's work then takes the step's
    core: 2 hosts on 2 cores ran the epoch 1.19x slower with it (bench/prefetch_bench.py),
    so such trainers get ``DGLCTL_PREFETCH=0`` unless the cluster's env sets it."""
    if cluster.transport != "local" or cores is None:
        return False
    per_host = cluster.servers_per_host + cluster.trainers_per_host * (
        1 + cluster.samplers_per_trainer)
    return hosts * per_host >= cores


def plan_job(cluster: ClusterConfig, opts: LaunchOptions, *, part_config: PartConfig,
             job_id: str, token: str, workspaces: Sequence[str], pythons: Sequence[str],
             port_base: int | None = None, cores: Sequence[int | None] | None = None,
             ifnames: Sequence[str | None] | None = None, project_dir: str = "work/project",
             script_rel: str | None = None) -> JobPlan:
    """The plan of a launch (pure: no I/O).

    ``part_config`` is the partition's config (``graph_name``, ``num_parts``, ``files``);
    ``workspaces`` and ``pythons`` are each host's, as preflight found them (or as configured,
    for a dry run); ``port_base`` is the chosen one (default: the configured one); ``cores``
    each host's usable CPUs (preflight), for the OMP_NUM_THREADS default (None: unknown);
    ``ifnames`` the interface carrying each host's data address (preflight), for the
    GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME defaults (None: unknown, left to torch);
    ``project_dir`` the project's folder in each workspace and ``script_rel`` SCRIPT's path in
    it (default: its file name), unless ``opts.module`` names what runs.
    """
    graph = graph_name(part_config)
    hosts = select_hosts(cluster, part_config.num_parts, part_config.where)
    if not len(workspaces) == len(pythons) == len(hosts):
        raise ValueError(f"{len(hosts)} hosts but {len(workspaces)} workspaces and "
                         f"{len(pythons)} interpreters")
    base = cluster.port_base if port_base is None else port_base
    k, tph = cluster.servers_per_host, cluster.trainers_per_host
    master_port, world = base + k, len(hosts) * tph
    master_addr = hosts[0].data_address
    plans = []
    for i, (h, ws, py) in enumerate(zip(hosts, workspaces, pythons, strict=True)):
        data_dir = join_path(ws, f"data/{graph}")
        plans.append(HostPlan(
            index=i, name=h.name, address=h.address, data_address=h.data_address, workspace=ws,
            python=py, files=host_files(part_config, i), bytes_needed=host_bytes(part_config, i),
            job_dir=join_path(ws, f"jobs/{job_id}"), data_dir=data_dir,
            part_config=f"{data_dir}/{graph}.json",
            ip_config=join_path(ws, f"jobs/{job_id}/ip_config.txt"),
            work_dir=join_path(ws, project_dir)))
    if opts.module:
        entry: tuple[str, ...] = ("-m", opts.module)
    else:
        assert opts.script is not None
        entry = (script_rel or opts.script.name,)

    shared = int(gpus_shared(cluster, len(plans)))

    def contract(hp: HostPlan, role: str, server_id: int = 0, device: str = "cpu"
                 ) -> dict[str, str]:
        env = runtime_environ(
            cluster, role=role, job_id=job_id, token=token, machine_id=hp.index,
            ip_config=hp.ip_config, part_config=hp.part_config, num_servers=k,
            num_trainers=tph, num_samplers=cluster.samplers_per_trainer, server_id=server_id,
            timeout=cluster.timeout, encrypt=int(cluster.encrypt), device=device,
            shared_gpu=shared if device != "cpu" else 0)
        return {**cluster.env, **env}

    no_idle_core = prefetch_without_core(cluster, len(plans), (cores or [None])[0])
    procs = []
    for hp in plans:
        for s in range(k):
            procs.append(ProcSpec(
                name=f"server-{hp.index}-{s}", host=hp.index, host_name=hp.name, role="server",
                rank=s, local_rank=s, argv=(hp.python, "-m", "runtime.server"),
                env=contract(hp, "server", s), cwd=hp.job_dir, port=base + s))
    for hp in plans:
        threads = omp_threads(cluster, (cores or [None] * len(plans))[hp.index])
        for local in range(tph):
            rank = hp.index * tph + local
            env = contract(hp, "trainer", device=trainer_device(cluster, local, rank))
            name = f"trainer-{hp.index}-{local}"
            env.update(torchrun_environ(
                rank=rank, local_rank=local, world=world, local_world=tph, group=hp.index,
                groups=len(plans), master_addr=master_addr, master_port=master_port,
                run_id=job_id, error_file=f"{hp.job_dir}/{name}.error.json",
                max_restarts=cluster.max_restarts))
            if threads is not None and "OMP_NUM_THREADS" not in cluster.env:
                env["OMP_NUM_THREADS"] = str(threads)
            if no_idle_core and "DGLCTL_PREFETCH" not in cluster.env:
                env["DGLCTL_PREFETCH"] = "0"
            if cluster.feature_cache_gb and "DGLCTL_FEATURE_CACHE_GB" not in cluster.env:
                env["DGLCTL_FEATURE_CACHE_GB"] = f"{cluster.feature_cache_gb:g}"
            ifname = (ifnames or [None] * len(plans))[hp.index]
            for var in SOCKET_IFNAME_VARS:
                if ifname is not None and var not in cluster.env:
                    env[var] = ifname
            procs.append(ProcSpec(
                name=name, host=hp.index, host_name=hp.name,
                role="trainer", rank=rank, local_rank=local,
                argv=(hp.python, *entry, *opts.script_args), env=env, cwd=hp.work_dir,
                port=master_port if rank == 0 else None))
    shm_dir = procs[0].env.get("DGLCTL_SHM_DIR", "/dev/shm")
    return JobPlan(job_id=job_id, graph_name=graph, script=opts.entry, hosts=tuple(plans),
                   procs=tuple(procs), port_base=base, master_addr=master_addr,
                   master_port=master_port, world_size=world, shm_dir=shm_dir,
                   ip_config=tuple((h.data_address, base) for h in hosts))
