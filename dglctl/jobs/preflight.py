"""The launch preflight, shared by ``dglctl launch`` and ``dglctl check``: ask every host's
agent (versions, workspace, disk, CPUs, busy ports), then judge the answers without I/O.

``launch`` stops when any host cannot answer (one ``GroupError`` naming each) and raises a
``PreflightError`` listing every problem; ``check`` asks the same questions, keeps each
host's failure as that host's result, and reports everything. Both name a problem with the
same words, because both take it from :func:`host_problems` and :func:`judge`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from ..config import ClusterConfig, Host, check_loopback, with_data_addresses
from ..display import human_bytes
from ..errors import HostFailure
from ..hosts.agent_client import AgentClient, PreflightReport
from ..hosts.group import fan_out
from .plan import busy_ports_problem, choose_ports, host_bytes, host_files, preflight_ports

if TYPE_CHECKING:
    from partitioner.format import PartConfig

T = TypeVar("T")

__all__ = ["HostCheck", "PreflightResult", "ask_each_host", "ask_hosts", "bytes_to_copy",
           "each_host", "gpu_problem", "host_problems", "judge", "local_versions", "preflight_ports"]


def local_versions() -> tuple[str, str]:
    """``(Python version, dglctl version)`` of this machine, which every host must match."""
    from dglctl import __version__

    return sys.version.split()[0], __version__


def ask_hosts(clients: Sequence[AgentClient], ports: Sequence[int],
              gpus: bool = False) -> list[PreflightReport]:
    """Every host's preflight report, all hosts at once, each asked about ``ports`` on its
    data address (and its GPUs, with ``gpus``); hosts that cannot answer raise one
    ``GroupError`` (what ``launch`` does)."""
    return fan_out(clients, lambda i, c: c.preflight(c.host.data_address, ports, gpus))


def ask_each_host(clients: Sequence[AgentClient], ports: Sequence[int],
                  gpus: bool = False) -> list[PreflightReport | HostFailure]:
    """As :func:`ask_hosts`, but a host that cannot answer gives its ``HostFailure`` in its
    place and the other hosts' reports still come back (what ``check`` does)."""
    return each_host(clients, lambda i, c: c.preflight(c.host.data_address, ports, gpus))


def each_host(clients: Sequence[AgentClient],
              fn: Callable[[int, AgentClient], T]) -> list[T | HostFailure]:
    """``fn(i, client)`` for every host at once; a host's failure is its result (a
    ``HostFailure`` naming the host), never an error for the others."""
    def safe(i: int, c: AgentClient) -> T | HostFailure:
        try:
            return fn(i, c)
        except Exception as e:  # noqa: BLE001 - every host's failure is reported, per host
            return HostFailure.of(c.host.name, e)

    return fan_out(clients, safe)


def bytes_to_copy(client: AgentClient, part_cfg: PartConfig, i: int) -> int:
    """Bytes of host ``i``'s partition files that are missing there or of another size (a
    file of the right size is checked after the copy, and rarely copied again). The client's
    transport must point at the workspace preflight found (expanded)."""
    files = part_cfg.files
    rels = host_files(part_cfg, i)
    have = client.checksums(client.transport.path(f"data/{part_cfg.graph_name}"), rels,
                            sizes_only=True, timeout=60)
    return sum(files[r]["size"] for r in rels
               if (h := have.get(r)) is None or h.size != files[r]["size"])


def learn_addresses(cluster: ClusterConfig, hosts: Sequence[Host],
                    reports: Sequence[PreflightReport | HostFailure],
                    ) -> tuple[ClusterConfig, tuple[Host, ...]]:
    """``cluster`` and ``hosts`` with the data addresses preflight learnt: a host whose name
    resolves only inside the cluster gets the address its SSH connection arrived at. The
    loopback rule of the config applies to what was learnt too (a ConfigError)."""
    found = {h.name: r.bind_address for h, r in zip(hosts, reports, strict=True)
             if h.data_address_from_host and isinstance(r, PreflightReport) and r.bind_address
             and r.bind_error is None}
    if not found:
        return cluster, tuple(hosts)
    cluster = with_data_addresses(cluster, found)
    by_name = {h.name: h for h in cluster.hosts}
    learnt = tuple(by_name[h.name] for h in hosts)
    check_loopback(cluster.path, learnt)
    return cluster, learnt


def host_problems(h: Host, r: PreflightReport, need: int | None,
                  to_copy: Callable[[], int], *, gpus: int = 0,
                  visible: str | None = None) -> dict[str, str]:
    """The problems in host ``h``'s report, keyed by what they are about (``python``,
    ``dglctl``, ``workspace``, ``disk``, ``address``, ``gpus``): another Python minor version
    or dglctl version than here, a workspace it cannot write, too little disk for the shards
    still to copy, a data address the host cannot listen on (not one of its own), fewer
    than ``gpus`` GPUs (those CUDA_VISIBLE_DEVICES=``visible`` leaves, when the cluster's
    env sets it).
    ``need`` is the bytes of its partition files (None: no partition given); ``to_copy``,
    called only when the disk holds less than ``need``, the bytes of them still missing."""
    here_py, here_dglctl = local_versions()
    name, problems = h.name, {}
    if r.python.split(".")[:2] != here_py.split(".")[:2]:
        problems["python"] = (f"host {name}: Python {r.python} ({r.executable}), here "
                              f"{here_py}: use the same minor version")
    if r.dglctl != here_dglctl:
        problems["dglctl"] = (f"host {name}: dglctl {r.dglctl}, here {here_dglctl}: "
                              "install the same version")
    if not r.workspace_writable:
        problems["workspace"] = f"host {name}: workspace {r.workspace} is not writable"
    elif need is not None and r.disk_free < need and r.disk_free < (missing := to_copy()):
        problems["disk"] = (f"host {name}: {human_bytes(r.disk_free)} free in {r.workspace}, "
                            f"the shards still to copy need {human_bytes(missing)} "
                            f"(of {human_bytes(need)})")
    if r.bind_error is not None:
        own = ", ".join(f"{a} ({n})" for a, n in r.interfaces.items()) or "unknown"
        address = h.data_address or r.bind_address or "(to be learnt from its SSH connection)"
        problems["address"] = (f"host {name}: cannot listen on its data address "
                               f"{address}: {r.bind_error} (the host's addresses: "
                               f"{own}); set data_address for it in the cluster YAML to its "
                               "address on the cluster's network")
    gpu = gpu_problem(name, gpus, r, visible)
    if gpu is not None:
        problems["gpus"] = gpu
    return problems


def gpu_problem(name: str, gpus: int, r: PreflightReport, visible: str | None) -> str | None:
    """Why host ``name`` cannot give its trainers ``gpus`` GPUs (None: it can, or none are
    asked). ``visible`` is CUDA_VISIBLE_DEVICES from the cluster's env (None: unset): its
    entries are the GPUs the trainers see, each index one the host has."""
    if gpus == 0 or r.gpus is None:
        return None
    want = f"host {name}: gpus_per_host is {gpus}"
    if r.gpu_error is not None:
        return f"{want}, but its GPUs could not be listed: {r.gpu_error}"
    listed = "; ".join(r.gpus) or "none"
    have = len(r.gpus)
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        bad = [e for e in entries if e.isdigit() and int(e) >= have]
        if bad:
            return (f"{want}, but CUDA_VISIBLE_DEVICES={visible} names GPU {bad[0]} and it "
                    f"has {have} (nvidia-smi -L: {listed})")
        if len(entries) < gpus:
            return (f"{want}, but CUDA_VISIBLE_DEVICES={visible} leaves its trainers "
                    f"{len(entries)}: set gpus_per_host to {len(entries)} or list more")
        return None
    if have < gpus:
        return (f"{want}, but it has {have} GPU(s) (nvidia-smi -L: {listed}): set "
                f"gpus_per_host (--num-gpus) to at most {have}")
    return None


@dataclass(frozen=True)
class HostCheck:
    """One host's preflight: its report (None: it did not answer, see ``failure``), the bytes
    of its partition files and of those still to copy (None: no partition given, or not
    asked), its own problems and its share of the port problem, each in launch's words."""

    host: Host
    report: PreflightReport | None
    failure: HostFailure | None = None
    need: int | None = None
    to_copy: int | None = None
    problems: Mapping[str, str] = field(default_factory=dict)  # host_problems()
    port_problem: str | None = None  # server ports busy here when no block is free

    @property
    def all_problems(self) -> list[str]:
        """Everything wrong with the host: why it did not answer, or its problems."""
        if self.failure is not None:
            return [self.failure.message]
        return [*self.problems.values(), *([self.port_problem] if self.port_problem else [])]

    @property
    def ok(self) -> bool:
        """Reachable and without problems."""
        return not self.all_problems


@dataclass(frozen=True)
class PreflightResult:
    """Every host's check, the port block a launch would take (None: none is free) and every
    problem, as ``launch`` would list them (hosts that did not answer first, the ports last)."""

    hosts: tuple[HostCheck, ...]
    ports: tuple[int, int] | None  # (server port base, MASTER_PORT)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A launch would pass preflight."""
        return not self.problems


def judge(cluster: ClusterConfig, hosts: Sequence[Host],
          reports: Sequence[PreflightReport | HostFailure], *,
          part_cfg: PartConfig | None = None,
          to_copy: Callable[[int], int] | None = None,
          explicit_port: bool = False) -> PreflightResult:
    """The problems of a preflight (no I/O but ``to_copy``): each host's (versions,
    workspace, disk), then the ports. ``reports[i]`` is host ``i``'s report or its failure;
    ``to_copy(i)`` gives the bytes host ``i`` still needs (asked only when its disk is short
    of its whole part); the port block is chosen from the busy ports of the hosts that
    answered, unless ``explicit_port`` (the base given on the command line) fixes it."""
    checks = [_check_host(cluster, i, h, r, part_cfg, to_copy)
              for i, (h, r) in enumerate(zip(hosts, reports, strict=True))]
    answered = {c.host.name: c.report.ports_busy for c in checks if c.report is not None}
    chosen = choose_ports(cluster, set().union(*answered.values()), explicit=explicit_port)
    problems = [c.failure.message for c in checks if c.failure is not None]
    problems += [p for c in checks for p in c.problems.values()]
    if chosen is None and answered:
        problems.append(busy_ports_problem(cluster, answered))
    else:
        checks = [replace(c, port_problem=None) for c in checks]
    return PreflightResult(tuple(checks), chosen, problems)


def _check_host(cluster: ClusterConfig, i: int, h: Host, r: PreflightReport | HostFailure,
                part_cfg: PartConfig | None,
                to_copy: Callable[[int], int] | None) -> HostCheck:
    """Host ``i``'s check, with the port problem it would have if no block were free."""
    if isinstance(r, HostFailure):
        return HostCheck(h, None, failure=r)
    need = host_bytes(part_cfg, i) if part_cfg is not None else None
    asked: list[int] = []

    def missing() -> int:
        if to_copy is None:
            raise ValueError("judging a partition's disk space needs to_copy")
        asked.append(to_copy(i))
        return asked[0]

    problems = host_problems(h, r, need, missing, gpus=cluster.gpus_per_host,
                             visible=cluster.env.get("CUDA_VISIBLE_DEVICES"))
    servers = set(range(cluster.port_base, cluster.port_base + cluster.servers_per_host))
    port = (busy_ports_problem(cluster, {h.name: r.ports_busy}) if servers & r.ports_busy
            else None)
    return HostCheck(h, r, need=need, to_copy=asked[0] if asked else None, problems=problems,
                     port_problem=port)
