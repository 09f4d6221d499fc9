"""The ``check`` command: the launch preflight alone, as a report of every host."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import HostError
from .launch import resolve_cluster

if TYPE_CHECKING:
    from ..config import ClusterConfig
    from ..display import Display
    from ..hosts.agent_client import PreflightReport
    from ..jobs.preflight import HostCheck, PreflightResult

OK, FAIL, INFO = "OK  ", "FAIL", "    "
SHOW_PORTS = 8  # busy ports listed per host in the text report (--json lists them all)


@click.command()
@click.option("--cluster", "cluster_path", type=click.Path(path_type=Path), default=None,
              help="Cluster YAML [default: the local cluster of configs/local.yaml].")
@click.option("--part-config", type=click.Path(path_type=Path), default=None,
              help="A partition's JSON: check only the hosts a launch of it would use, and "
                   "their disk space for the shards they still lack.")
@click.option("--port-base", type=int, default=None,
              help="First server port on each host, as 'launch --port-base': that block "
                   "must be free (without it, a busy block moves to the next free one).")
@click.option("--num-gpus", type=int, default=None, metavar="N",
              help="GPUs per host, as 'launch --num-gpus': each host must have N "
                   "[default: the cluster YAML's gpus_per_host].")
@click.option("--slurm", is_flag=True,
              help="Check the nodes of this shell's Slurm allocation, as 'launch --slurm' "
                   "[default: on inside an allocation when no --cluster is given].")
@click.option("--json", "json_mode", is_flag=True,
              help="One JSON object: every host's findings and the list of problems.")
@click.pass_obj
def check(app: Any, cluster_path: Path | None, part_config: Path | None,
          port_base: int | None, num_gpus: int | None, slurm: bool, json_mode: bool) -> None:
    """Check every host as 'dglctl launch' would, without starting anything.

    \b
    For each host: reachable (or the exact error), Python and dglctl versions against this
    machine's, workspace writable, its data address one it can listen on (and the interface
    that carries it), free disk (with --part-config: the bytes its shards still need), usable
    CPUs, its GPUs (when gpus_per_host asks for any), busy ports in the cluster's port
    range; then the port block a launch
    would take. Exit 0 when a launch would pass preflight, 1 when any host has a problem
    (each named as launch's preflight names it). An unreachable host is reported as that
    host's problem; the other hosts are still checked.
    """
    display = app.display(json_mode)
    cluster = resolve_cluster(cluster_path, slurm, display, what="checking").with_overrides(
        port_base=port_base, gpus_per_host=num_gpus)
    result, copies = run_check(cluster, part_config, explicit_port=port_base is not None)
    display.json(check_json(cluster, result, copies, explicit_port=port_base is not None))
    render_check(cluster, result, copies, display)
    if not result.ok:
        # An error (exit 1), not click's Exit: main() renders it on stderr, after the report.
        raise HostError(f"check found {len(result.problems)} problem(s); a launch would stop "
                        "at preflight:\n  " + "\n  ".join(result.problems),
                        hint="fix them and run 'dglctl check' again")


def run_check(cluster: ClusterConfig, part_config: Path | None, *,
              explicit_port: bool = False) -> tuple[PreflightResult, list[int | None]]:
    """The preflight of ``cluster``'s hosts (with ``part_config``: of the hosts its launch
    uses), every host's failure kept as its result; and the bytes each host still lacks of
    its shards (None: no partition, or not known)."""
    from ..errors import HostFailure
    from ..hosts.agent_client import AgentClient, PreflightReport
    from ..hosts.transports import make_transport
    from ..jobs import preflight as pf
    from ..jobs.launcher import LaunchOptions, read_part_config
    from ..jobs.plan import select_hosts

    part_cfg = None
    hosts = cluster.hosts
    if part_config is not None:
        part_cfg = read_part_config(LaunchOptions(None, (), part_config), cluster)
        hosts = select_hosts(cluster, part_cfg.num_parts, part_cfg.where)
    transports = [make_transport(h, cluster) for h in hosts]
    clients = [AgentClient(t) for t in transports]
    try:
        reports = pf.ask_each_host(clients, pf.preflight_ports(cluster),
                                   gpus=cluster.gpus_per_host > 0)
        cluster, hosts = pf.learn_addresses(cluster, hosts, reports)
        for t, r in zip(transports, reports, strict=True):
            if isinstance(r, PreflightReport):
                t.workspace = r.workspace
        copies: list[int | None] = [None] * len(hosts)
        if part_cfg is not None:
            def lacking(i: int, c: AgentClient) -> int | None:
                r = reports[i]
                if not isinstance(r, PreflightReport) or not r.workspace_writable:
                    return None
                return pf.bytes_to_copy(c, part_cfg, i)

            found = pf.each_host(clients, lacking)
            # A host that answered preflight but not the size check: that is its failure.
            reports = [f if isinstance(f, HostFailure) else r
                       for r, f in zip(reports, found, strict=True)]
            copies = [None if isinstance(f, HostFailure) else f for f in found]
        result = pf.judge(cluster, hosts, reports, part_cfg=part_cfg,
                          to_copy=lambda i: copies[i] or 0, explicit_port=explicit_port)
    finally:
        for t in transports:
            t.close()
    return result, copies


def _ports_range(cluster: ClusterConfig) -> tuple[int, int]:
    from ..jobs.plan import preflight_ports

    ports = preflight_ports(cluster)
    return ports[0], ports[-1]


def check_json(cluster: ClusterConfig, result: PreflightResult, copies: list[int | None], *,
               explicit_port: bool = False) -> dict[str, Any]:
    """``check --json``: every host's findings, the port block and every problem."""
    from ..hosts.netif import interface_of
    from ..jobs.preflight import local_versions

    here_py, here_dglctl = local_versions()
    hosts = []
    for c, lacking in zip(result.hosts, copies, strict=True):
        r = c.report
        hosts.append({
            "name": c.host.name, "address": c.host.address, "data_address": c.host.data_address,
            "reachable": r is not None, "ok": c.ok,
            "error": c.failure.message if c.failure else None,
            "hint": c.failure.hint if c.failure else None,
            "hostname": r.hostname if r else None,
            "python": r.python if r else None, "executable": r.executable if r else None,
            "python_here": here_py, "dglctl": r.dglctl if r else None,
            "dglctl_here": here_dglctl,
            "workspace": r.workspace if r else c.host.workspace,
            "workspace_writable": r.workspace_writable if r else None,
            "disk_free": r.disk_free if r else None, "bytes_needed": c.need,
            "bytes_to_copy": lacking, "cpus": r.cpus if r else None,
            "ports_busy": sorted(r.ports_busy) if r else None,
            "bind_error": r.bind_error if r else None,
            "gpus": list(r.gpus) if r and r.gpus is not None else None,
            "gpu_error": r.gpu_error if r else None,
            "interface": interface_of(c.host.data_address, r.interfaces) if r else None,
            "problems": c.all_problems})
    lo, hi = _ports_range(cluster)
    base = result.ports[0] if result.ports else None
    return {"ok": result.ok, "cluster": cluster.path, "hosts": hosts,
            "ports": {"configured_base": cluster.port_base, "explicit": explicit_port,
                      "searched": [lo, hi], "servers_per_host": cluster.servers_per_host,
                      "base": base, "master_port": result.ports[1] if result.ports else None,
                      "moved": base is not None and base != cluster.port_base},
            "problems": result.problems}


def _mark(problem: str | None, fine: str) -> str:
    return f"  {FAIL}  {problem}" if problem else f"  {OK}  {fine}"


def _address_line(address: str, r: PreflightReport) -> str:
    from ..hosts.netif import interface_of

    ifname = interface_of(address, r.interfaces)
    if ifname is None:
        return f"data address {address} can be listened on (its interface is not known)"
    return (f"data address {address} can be listened on (interface {ifname}: the trainers' "
            "GLOO/NCCL_SOCKET_IFNAME)")


def _host_lines(cluster: ClusterConfig, c: HostCheck, lacking: int | None) -> list[str]:
    """One host's block: a header, then each finding with its mark."""
    from ..display import human_bytes
    from ..jobs.preflight import local_versions

    head = f"{c.host.name}  {c.host.address}"
    if c.host.data_address != c.host.address:
        head += f" (data {c.host.data_address})"
    r = c.report
    if r is None:
        assert c.failure is not None
        lines = [head, _mark(c.failure.message, "")]
        return lines + ([f"        hint: {c.failure.hint}"] if c.failure.hint else [])
    here_py, here_dglctl = local_versions()
    p = c.problems
    lines = [head, _mark(None, f"reachable (hostname {r.hostname})"),
             _mark(p.get("python"), f"Python {r.python} ({r.executable}), here {here_py}"),
             _mark(p.get("dglctl"), f"dglctl {r.dglctl}, here {here_dglctl}"),
             _mark(p.get("workspace"), f"workspace {r.workspace} writable"),
             _mark(p.get("address"), _address_line(c.host.data_address, r))]
    if r.workspace_writable:
        disk = f"disk {human_bytes(r.disk_free)} free"
        if c.need is not None:
            still = "?" if lacking is None else human_bytes(lacking)
            disk += f"; its shards {human_bytes(c.need)}, {still} still to copy"
        lines.append(_mark(p.get("disk"), disk))
    lines.append(f"  {INFO}  CPUs: {r.cpus if r.cpus is not None else 'unknown'} usable")
    if r.gpus is not None:
        lines.append(_mark(p.get("gpus"), f"GPUs: {len(r.gpus)}, {cluster.gpus_per_host} "
                                          f"per host asked ({'; '.join(r.gpus) or 'none'})"))
    lo, hi = _ports_range(cluster)
    busy = sorted(r.ports_busy)
    shown = ", ".join(map(str, busy[:SHOW_PORTS])) + (", ..." if len(busy) > SHOW_PORTS else "")
    what = f"ports {lo}..{hi}: " + (f"{len(busy)} busy ({shown})" if busy else "none busy")
    if r.bind_error is not None:
        lines.append(f"  {INFO}  ports {lo}..{hi}: not probed (the data address cannot be "
                     "listened on)")
    else:
        lines.append(_mark(c.port_problem, what))
    return lines


def render_check(cluster: ClusterConfig, result: PreflightResult, copies: list[int | None],
                 display: Display) -> None:
    """``check`` for people: a block per host, the port block, one summary line."""
    out = display.result
    k = cluster.servers_per_host
    out(f"cluster {cluster.path}: {len(result.hosts)} host(s), ports from "
        f"{cluster.port_base} ({k} server(s) per host, then MASTER_PORT)")
    for c, lacking in zip(result.hosts, copies, strict=True):
        for line in _host_lines(cluster, c, lacking):
            out(line)
    reached = sum(c.report is not None for c in result.hosts)
    if reached:
        some = "" if reached == len(result.hosts) else " (of the hosts that answered)"
        out(f"ports{some}:")
        if result.ports is None:  # then the ports' problem is the last one
            out(_mark(result.problems[-1], ""))
        else:
            base, master = result.ports
            moved = (f"ports {cluster.port_base}.. are in use; " if base != cluster.port_base
                     else "")
            servers = f"{base}" if k == 1 else f"{base}..{base + k - 1}"
            out(_mark(None, f"{moved}launch would use {base}..{base + k} (server port(s) "
                            f"{servers}, MASTER_PORT {master})"))
    bad = [c for c in result.hosts if not c.ok]
    if result.ok:
        out(f"check: {len(result.hosts)} host(s) OK: a launch would pass preflight")
    else:
        out(f"check: {len(result.problems)} problem(s) on {len(bad) or len(result.hosts)} of "
            f"{len(result.hosts)} host(s): a launch would stop at preflight")


COMMANDS = [check]
