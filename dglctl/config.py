"""The cluster config (YAML): hosts, SSH settings, workspace, process counts; validated in one place.

Every error names the file, the key path and the value, and an unknown key comes with the
nearest valid one. Command-line flags override the file through ``with_overrides``.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from runtime.env import DEFAULT_TIMEOUT  # the job's timeout, as its processes default it
from runtime.rpc.ip_config import DEFAULT_PORT as DEFAULT_PORT_BASE  # DGL's 30050

from .errors import ConfigError

TRANSPORTS = ("local", "ssh", "slurm")


@dataclass(frozen=True)
class SSHSettings:
    """How dglctl reaches a host over SSH (keys or agent; passwords are never used)."""

    user: str | None = None  # None here and below: what ~/.ssh/config (ssh -G) says
    port: int | None = None
    key: str | None = None
    known_hosts: str | None = None  # added to the config's (~/.ssh/known_hosts, /etc/ssh/...)
    strict_host_keys: bool = True
    connect_timeout: float = 10.0
    config: str | None = None  # the OpenSSH client config [default: ~/.ssh/config]


# The data address of a host whose name resolves only inside the cluster (a compute node
# behind a login node): preflight takes the address its SSH connection arrives at.
FROM_HOST = ""


@dataclass(frozen=True)
class Host:
    """One machine of the cluster. Its index in ``hosts`` is its machine (= partition) id."""

    address: str
    name: str
    data_address: str  # FROM_HOST: the host's own answer at preflight
    ssh: SSHSettings
    python: str
    workspace: str

    @property
    def data_address_from_host(self) -> bool:
        """Whether the data address is learnt at preflight (a name only the cluster knows)."""
        return self.data_address == FROM_HOST



def with_data_addresses(cluster: ClusterConfig, found: Mapping[str, str]) -> ClusterConfig:
    """``cluster`` with the data addresses preflight learnt (``{host name: address}``) set."""
    def learnt(hosts: tuple[Host, ...]) -> tuple[Host, ...]:
        return tuple(replace(h, data_address=found[h.name]) if h.name in found else h
                     for h in hosts)

    return replace(cluster, hosts=learnt(cluster.hosts), spares=learnt(cluster.spares))


@dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster description."""

    path: str
    hosts: tuple[Host, ...]
    transport: str = "ssh"
    env: dict[str, str] = field(default_factory=dict)
    servers_per_host: int = 1
    trainers_per_host: int = 1
    samplers_per_trainer: int = 0
    # GPUs each host gives its trainers (0: CPU trainers); trainer k of a host trains on
    # cuda:k (modulo the GPUs), as CUDA_VISIBLE_DEVICES in env: numbers them.
    gpus_per_host: int = 0
    # Whether trainers_per_host was given (YAML or --num-trainers); if not, it follows
    # gpus_per_host: one trainer per GPU.
    trainers_given: bool = True
    # GB each trainer may keep of copies of other machines' feature rows (0: none).
    feature_cache_gb: float = 0.0
    port_base: int = DEFAULT_PORT_BASE
    timeout: float = DEFAULT_TIMEOUT
    # Seconds the job's processes outlive a launcher that stopped renewing their lease
    # (killed, cut off); 0: LEASE_TIMEOUTS job timeouts (agent/protocol.py).
    lease: float = 0.0
    # Encrypt every connection to the job's servers (CURVE keys from the job token).
    encrypt: bool = False
    # How many times a failed attempt's trainers are started again (servers kept), as
    # torchrun's --max-restarts; 0: the first failure ends the job.
    max_restarts: int = 0
    # Hosts that take a lost host's place (its part, its processes) when a job restarts;
    # each is used once, in order.
    spares: tuple[Host, ...] = ()
    # The DGL ip_config.txt the hosts came from (``launch --ip-config``), else None; ``path``
    # is then the --cluster file that gave the other settings, or the ip_config itself.
    ip_config: str | None = None
    # The file's own python and workspace (None: python not given), which the hosts it lists
    # inherit; a Slurm cluster's nodes (found in the allocation, not listed) take them.
    python: str | None = None
    workspace: str = "~/dglctl-workspace"
    # transport slurm: the Slurm job (allocation) whose nodes are the hosts.
    slurm_job: str | None = None

    def source(self) -> dict[str, Any]:
        """What rebuilds this cluster later (recorded in a job's manifest): the cluster file,
        and the ip_config when the hosts came from one."""
        if self.ip_config is None:
            return {"path": self.path, "transport": self.transport}
        base = None if self.path == self.ip_config else self.path
        return {"path": base, "ip_config": self.ip_config, "transport": self.transport}

    def record(self) -> dict[str, Any]:
        """The cluster itself, as a job's manifest keeps it: every resolved setting (hosts,
        their SSH settings and learnt data addresses, counts, env), with local paths made
        absolute, so ``status``, ``logs`` and ``stop`` reach the job's hosts from any folder,
        and after the YAML was edited or deleted (``cluster_from_record``)."""
        def absolute(path: str | None) -> str | None:
            return path if path is None or path.startswith("~") else os.path.abspath(path)

        out = asdict(self)
        out["path"] = absolute(self.path)
        out["ip_config"] = absolute(self.ip_config)
        for h in [*out["hosts"], *out["spares"]]:
            for key in ("key", "known_hosts", "config"):
                h["ssh"][key] = absolute(h["ssh"][key])
        return out

    def with_overrides(self, **overrides: Any) -> ClusterConfig:
        """A copy with command-line values (None means: keep the file's)."""
        values = {k: v for k, v in overrides.items() if v is not None}
        flags = {"servers_per_host": "--num-servers", "trainers_per_host": "--num-trainers"}
        for key, flag in flags.items():
            if key in values and values[key] < 1:
                raise ConfigError(f"{flag} must be at least 1, got {values[key]}")
        if values.get("gpus_per_host", 0) < 0:
            raise ConfigError(f"--num-gpus must be >= 0, got {values['gpus_per_host']}")
        if values.get("feature_cache_gb", 0) < 0:
            raise ConfigError(f"--feature-cache-gb must be >= 0, got "
                              f"{values['feature_cache_gb']}")
        if "trainers_per_host" in values:
            values["trainers_given"] = True
        elif "gpus_per_host" in values and not self.trainers_given:
            values["trainers_per_host"] = max(1, values["gpus_per_host"])
        if values.get("samplers_per_trainer", 0) < 0:
            raise ConfigError("--num-samplers must be >= 0")
        if values.get("max_restarts", 0) < 0:
            raise ConfigError(f"--max-restarts must be >= 0, got {values['max_restarts']}")
        return replace(self, **values)


_TOP = {"hosts", "transport", "ssh", "workspace", "python", "env", "servers_per_host",
        "trainers_per_host", "samplers_per_trainer", "port_base", "timeout", "lease", "encrypt",
        "max_restarts", "spares", "gpus_per_host", "feature_cache_gb"}
_HOST = {"address", "name", "data_address", "user", "port", "key", "python", "workspace"}
_SSH = {"user", "port", "key", "known_hosts", "strict_host_keys", "connect_timeout", "config"}


# What each kind of value may be. A host's name is a folder name (its workspace on a local
# cluster, its logs), so it is a safe file name; an address or user goes on ssh command
# lines, so it never starts with "-"; no value anywhere holds a control character (NUL, newline,
# ESC...): each is joined into paths, command lines and terminal output.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")
_ADDRESS = re.compile(r"[A-Za-z0-9._:%][A-Za-z0-9._:%-]{0,252}")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9._@-]{0,255}")
_COMMAND = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9._+-]{0,255}")


def _bad(path: str, where: str, value: Any, why: str, hint: str | None = None) -> ConfigError:
    return ConfigError(f"{path}: {where} {why}, got {value!r}", hint=hint)


def _check_text(path: str, where: str, value: Any) -> None:
    """Refuse a control character in any key or string value, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_text(path, f"{where}.{k}" if where else str(k), k)
            _check_text(path, f"{where}.{k}" if where else str(k), v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_text(path, f"{where}[{i}]", v)
    elif isinstance(value, str) and _CONTROL.search(value):
        raise _bad(path, where, value, "holds a control character (NUL, newline, ESC, ...)")


def _matches(path: str, where: str, value: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value) or value in (".", ".."):
        raise _bad(path, where, value, f"must be {what}")
    return value


def _name(path: str, where: str, value: str) -> str:
    if not _NAME.fullmatch(value) or value in (".", ".."):
        raise _bad(path, where, value, "must be a folder name of [A-Za-z0-9._-] (not '.' or "
                   "'..'): it names the host's folders", hint="set 'name:' for the host")
    return value


def _workspace(path: str, where: str, value: Any) -> str:
    value = str(value)
    if not (value.startswith("/") or value.startswith("~")):
        raise _bad(path, where, value, "must be an absolute path or start with '~' (a relative "
                   "one would depend on where each command starts)")
    return value


def _python(path: str, where: str, value: Any) -> str:
    value = str(value)
    if value.startswith("/") or value == "~" or value.startswith("~/"):
        return value  # a path; "~/..." is expanded by the host's shell (remote_line)
    return _matches(path, where, value, _COMMAND, "an absolute path, '~/...' or a command name "
                    "found on PATH (e.g. python3)")


def _local_path(path: str, where: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _bad(path, where, value, "must be a path")
    return value


def _is_loopback(ip: str) -> bool:
    """Whether ``ip`` is this machine to whoever connects to it (0.0.0.0 and ::ffff:127.x too)."""
    a = ipaddress.ip_address(ip)
    mapped = getattr(a, "ipv4_mapped", None)
    return a.is_loopback or a.is_unspecified or (mapped is not None and mapped.is_loopback)


def check_loopback(path: str, hosts: tuple[Host, ...] | list[Host]) -> None:
    """Refuse loopback data addresses mixed with real ones: on a cluster of several machines a
    loopback address makes a host talk to itself. Only-loopback is the local cluster."""
    known = [h for h in hosts if not h.data_address_from_host]  # spares too
    local = [h for h in known if _is_loopback(h.data_address)]
    remote = [h for h in known if not _is_loopback(h.data_address)]
    if local and remote:
        a, b = local[0], remote[0]
        raise ConfigError(
            f"{path}: host {a.name!r} has the loopback data address {a.data_address} but "
            f"host {b.name!r} has {b.data_address}: the other hosts would reach "
            f"{a.name!r} at their own loopback",
            hint=f"set data_address of {a.name!r} to its IP on the data network (or use only "
                 "loopback addresses, for a cluster on this machine)")


def _unknown(path: str, where: str, key: str, allowed: set[str]) -> ConfigError:
    near = difflib.get_close_matches(key, sorted(allowed), n=1)
    hint = f"did you mean {near[0]!r}?" if near else f"allowed keys: {', '.join(sorted(allowed))}"
    return ConfigError(f"{path}: unknown key {where}{key!r}", hint=hint)


def _check_keys(path: str, where: str, data: dict, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise _unknown(path, where, str(key), allowed)


def _typed(path: str, where: str, value: Any, kind: type, *, minimum: float | None = None) -> Any:
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise ConfigError(f"{path}: {where} must be {kind.__name__}, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{path}: {where} must be >= {minimum}, got {value!r}")
    return value


def _address(path: str, where: str, value: Any) -> str:
    return _matches(path, where, value, _ADDRESS, "a host name or IP address (of "
                    "[A-Za-z0-9._:%-], not starting with '-')")


def _user(path: str, where: str, value: Any) -> str | None:
    if value is None:
        return None
    return _matches(path, where, value, _USER, "a user name (of [A-Za-z0-9._@-], not starting "
                    "with '-')")


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
        return True
    except ValueError:
        return False


def resolve_ip(address: str) -> str | None:
    """The IP of ``address`` (itself if it is one); None when it does not resolve here."""
    ip = _resolve(address)
    return ip if _is_ip(ip) else None


def _resolve(address: str) -> str:
    """The IP of ``address`` (itself if it is one; unresolvable names are left as they are,
    and rejected below with a hint to set ``data_address``)."""
    import socket

    if _is_ip(address):
        return address
    try:
        return socket.gethostbyname(address)
    except OSError:
        return address


def load_cluster_config(path: str | Path) -> ClusterConfig:
    """Read and validate a cluster YAML file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such cluster config",
                          hint="see configs/local.yaml and configs/cluster.example.yaml") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{line}: not valid YAML ({e.problem})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML ({e})") from None
    return parse_cluster_config(data, str(p))


def _host(path: str, where: str, h: Any, seen: dict[str, str], *, ssh: SSHSettings,
          transport: str, python: str, workspace: str) -> Host:
    """One entry of ``hosts`` or ``spares`` (at ``where``): an address, or a mapping whose
    settings override the file's; ``seen`` (name -> where) catches a name used twice."""
    if isinstance(h, str):
        h = {"address": h}
    if not isinstance(h, dict):
        raise ConfigError(f"{path}: {where} must be an address or a mapping, got {h!r}")
    _check_keys(path, f"{where}.", h, _HOST)
    if "address" not in h:
        raise ConfigError(f"{path}: {where} has no 'address'")
    address = _address(path, f"{where}.address", h["address"])
    data_address = _resolve(str(h.get("data_address") or address))
    if data_address == address and transport == "ssh" and not _is_ip(address):
        # An alias of ~/.ssh/config (address: gpu0): its HostName is the machine.
        from .hosts.ssh_config import resolve_address

        hostname = resolve_address(address, ssh.config)
        data_address = _resolve(hostname)
        if not _is_ip(data_address) and "data_address" not in h:
            # A name only the cluster's DNS (or its jump host) knows: ask the host.
            data_address = FROM_HOST
    try:
        if data_address != FROM_HOST:
            ipaddress.ip_address(data_address)
    except ValueError:
        raise ConfigError(
            f"{path}: {where}: {data_address!r} does not resolve to an IP address (servers "
            "bind to the data address and ip_config.txt lists it)",
            hint="set data_address to the host's IP on the data network") from None
    name = _name(path, f"{where}.name", str(h.get("name", address)))
    if name in seen:
        raise ConfigError(f"{path}: {where} repeats host {name!r} (also {seen[name]})")
    seen[name] = where
    host_ssh = replace(
        ssh,
        user=_user(path, f"{where}.user", h.get("user", ssh.user)),
        port=_typed(path, f"{where}.port", h["port"], int, minimum=1)
        if h.get("port") is not None else ssh.port,
        key=_local_path(path, f"{where}.key", h.get("key", ssh.key)),
    )
    return Host(address=address, name=name, data_address=data_address, ssh=host_ssh,
                python=_python(path, f"{where}.python", h.get("python", python)),
                workspace=_workspace(path, f"{where}.workspace", h.get("workspace", workspace)))


def parse_cluster_config(data: Any, path: str = "<config>") -> ClusterConfig:
    """Validate already-parsed YAML data."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level (with a 'hosts' list)")
    _check_text(path, "", data)
    _check_keys(path, "", data, _TOP)
    transport = data.get("transport", "ssh")
    if transport not in TRANSPORTS:
        raise ConfigError(f"{path}: transport must be one of {', '.join(TRANSPORTS)}, got "
                          f"{transport!r}")
    ssh_data = data.get("ssh", {}) or {}
    if not isinstance(ssh_data, dict):
        raise ConfigError(f"{path}: ssh must be a mapping")
    _check_keys(path, "ssh.", ssh_data, _SSH)
    ssh = SSHSettings(
        user=_user(path, "ssh.user", ssh_data.get("user")),
        port=_typed(path, "ssh.port", ssh_data["port"], int, minimum=1)
        if ssh_data.get("port") is not None else None,
        key=_local_path(path, "ssh.key", ssh_data.get("key")),
        known_hosts=_local_path(path, "ssh.known_hosts", ssh_data.get("known_hosts")),
        config=_local_path(path, "ssh.config", ssh_data.get("config")),
        strict_host_keys=_typed(path, "ssh.strict_host_keys",
                                ssh_data.get("strict_host_keys", True), bool),
        connect_timeout=_typed(path, "ssh.connect_timeout",
                               ssh_data.get("connect_timeout", 10.0), float, minimum=0.1),
    )
    python = _python(path, "python", data.get("python", "python3"))
    workspace = _workspace(path, "workspace", data.get("workspace", "~/dglctl-workspace"))
    hosts_data = data.get("hosts")
    if transport == "slurm":
        if hosts_data is not None or data.get("spares") is not None:
            raise ConfigError(f"{path}: transport slurm takes its hosts from the allocation "
                              "(its nodes, in order): remove 'hosts' and 'spares'",
                              hint="choose nodes with salloc/sbatch (-N, -w, --exclude)")
        hosts_data = []
    elif not isinstance(hosts_data, list) or not hosts_data:
        raise ConfigError(f"{path}: 'hosts' must be a non-empty list",
                          hint="e.g. hosts: [{address: 10.0.0.1}, {address: 10.0.0.2}]")
    spares_data = data.get("spares") or []
    if not isinstance(spares_data, list):
        raise ConfigError(f"{path}: 'spares' must be a list of hosts, like 'hosts'",
                          hint="e.g. spares: [{address: 10.0.0.9}]")
    seen: dict[str, str] = {}
    hosts = [_host(path, f"hosts[{i}]", h, seen, ssh=ssh, transport=transport, python=python,
                   workspace=workspace) for i, h in enumerate(hosts_data)]
    spares = [_host(path, f"spares[{i}]", h, seen, ssh=ssh, transport=transport,
                    python=python, workspace=workspace) for i, h in enumerate(spares_data)]
    check_loopback(path, [*hosts, *spares])
    env = data.get("env", {}) or {}
    if not isinstance(env, dict):
        raise ConfigError(f"{path}: env must be a mapping of NAME: value")
    for k in env:
        if not isinstance(k, str) or not k.replace("_", "").isalnum():
            raise ConfigError(f"{path}: env key {k!r} is not a valid variable name")
    gpus = _typed(path, "gpus_per_host", data.get("gpus_per_host", 0), int, minimum=0)
    return ClusterConfig(
        path=path,
        python=python if "python" in data else None,
        workspace=workspace,
        hosts=tuple(hosts),
        spares=tuple(spares),
        transport=transport,
        env={str(k): str(v) for k, v in env.items()},
        servers_per_host=_typed(path, "servers_per_host", data.get("servers_per_host", 1), int,
                                minimum=1),
        trainers_per_host=_typed(path, "trainers_per_host",
                                 data.get("trainers_per_host", max(1, gpus)), int, minimum=1),
        gpus_per_host=gpus,
        trainers_given="trainers_per_host" in data,
        feature_cache_gb=_typed(path, "feature_cache_gb", data.get("feature_cache_gb", 0.0),
                                float, minimum=0),
        samplers_per_trainer=_typed(path, "samplers_per_trainer",
                                    data.get("samplers_per_trainer", 0), int, minimum=0),
        port_base=_typed(path, "port_base", data.get("port_base", DEFAULT_PORT_BASE), int,
                         minimum=1024),
        timeout=_typed(path, "timeout", data.get("timeout", DEFAULT_TIMEOUT), float,
                       minimum=1.0),
        lease=_typed(path, "lease", data.get("lease", 0.0), float, minimum=0),
        encrypt=_typed(path, "encrypt", data.get("encrypt", False), bool),
        max_restarts=_typed(path, "max_restarts", data.get("max_restarts", 0), int, minimum=0),
    )


def cluster_from_ip_config(path: str | Path, base: ClusterConfig | None = None) -> ClusterConfig:
    """A cluster whose hosts are the lines of a DGL ip_config.txt (``launch --ip-config``).

    Other settings come from ``base`` (the --cluster file) when given; without one, loopback
    addresses use the local transport and anything else SSH with default settings.
    """
    from runtime.rpc.ip_config import read_ip_config

    machines = read_ip_config(path)  # its IpConfigError names the file and line (exit 2)
    ports = {m.port for m in machines}
    if len(ports) != 1:
        raise ConfigError(f"{path}: every line must use the same port (found {sorted(ports)})",
                          hint="servers of every machine listen on PORT + k")
    loopback = all(ipaddress.ip_address(m.ip).is_loopback for m in machines)
    port_base = ports.pop()
    data = {"hosts": [{"name": f"m{m.machine_id}", "address": m.ip} for m in machines],
            "transport": "local" if loopback else "ssh", "port_base": port_base}
    if base is None:
        return replace(parse_cluster_config(data, str(path)), ip_config=str(path))
    template = base.hosts[0]
    hosts = tuple(replace(template, address=m.ip, name=f"m{m.machine_id}", data_address=m.ip)
                  for m in machines)
    check_loopback(str(path), hosts)
    return replace(base, hosts=hosts, port_base=port_base, path=base.path,
                   ip_config=str(path))


def cluster_from_record(record: dict[str, Any]) -> ClusterConfig:
    """The cluster a job's manifest recorded with ``ClusterConfig.record()``."""
    data = dict(record)
    for key in ("hosts", "spares"):
        data[key] = tuple(Host(**{**h, "ssh": SSHSettings(**h["ssh"])})
                          for h in data.get(key, ()))
    return ClusterConfig(**data)


def load_cluster_source(source: dict[str, Any]) -> ClusterConfig:
    """The cluster a job was launched on, from ``ClusterConfig.source()`` as its manifest
    recorded it."""
    base = load_cluster_config(source["path"]) if source.get("path") else None
    if source.get("ip_config"):
        return cluster_from_ip_config(source["ip_config"], base)
    if base is None:
        raise ConfigError("the job's manifest names no cluster file")
    return base
