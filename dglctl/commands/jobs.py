"""Job commands on recorded jobs: ``status``, ``stop``, ``logs``."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError, HostError

if TYPE_CHECKING:
    from ..hosts.agent_client import AgentClient, ProcState
    from ..jobs.manifest import JobManifest


def _clients(manifest: JobManifest) -> list[AgentClient]:
    from ..hosts.agent_client import AgentClient
    from ..jobs.manifest import transports_for

    return [AgentClient(t) for t in transports_for(manifest)]


def _close(clients: list[AgentClient]) -> None:
    for c in clients:
        c.transport.close()


def _fmt_secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m"


@click.command()
@click.argument("job", required=False)
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(app: Any, job: str | None, json_mode: bool) -> None:
    """Show JOB's processes on every host (or list jobs without JOB)."""
    from ..hosts.agent_client import ProcState, ProcStatus
    from ..jobs.manifest import JobManifest, JobState, list_jobs
    from ..jobs.observe import probe_job

    display = app.display(json_mode)
    if job is None:
        jobs = list_jobs()
        display.json([{"job": j.job_id, "state": j.state, "script": j.script,
                       "hosts": [h.name for h in j.hosts], "created": j.created} for j in jobs])
        if not jobs:
            display.result("no jobs")
        for j in jobs:
            when = time.strftime('%Y-%m-%d %H:%M', time.localtime(j.created))
            display.result(f"{j.job_id}  {j.state:<9}  {when}  {Path(j.script).name}  on "
                           f"{', '.join(h.name for h in j.hosts)}")
        return
    m = JobManifest.load(job)
    clients = _clients(m)
    try:
        states = probe_job(clients, m)
    finally:
        _close(clients)
    alive = any(s.state is ProcStatus.RUNNING for s in states.values())
    state = m.state if m.state not in (JobState.RUNNING, JobState.STARTING) or alive \
        else JobState.STOPPED
    stats = _server_stats(m, states) if alive else {}
    rows = []
    for p in m.procs:
        s = states.get(p.name, ProcState(p.name, p.pgid, ProcStatus.MISSING))
        how = str(s.state)
        if s.state is ProcStatus.EXITED:
            how = f"exited {s.code}"
        elif s.state is ProcStatus.KILLED:
            how = f"killed ({s.signal})"
        if s.lease_expired is not None:
            how = "lease expired"  # ended by its wrapper: the launcher had gone
        rows.append({"host": m.hosts[p.host].name, "role": p.role, "rank": p.rank,
                     "pid": s.pid, "pgid": p.pgid, "state": how, "uptime": s.uptime,
                     "cpu_seconds": s.cpu_seconds, "rss_bytes": s.rss_bytes,
                     "server_stats": stats.get(p.name)})
    supervision, said = _supervision(m, states)
    display.json({"job": m.job_id, "state": state, "supervision": supervision,
                  "processes": rows, "result": m.result})
    display.result(f"job {m.job_id}: {state}  ({Path(m.script).name}, {len(m.hosts)} hosts)")
    if alive:
        display.result(said)
    display.result(f"{'host':<10} {'role':<8} {'rank':>4} {'pid':>8} {'state':<14} "
                   f"{'uptime':>7} {'cpu':>7} {'mem':>9}")
    for r in rows:
        mem = f"{r['rss_bytes'] / 2**20:.0f}MiB" if r["rss_bytes"] else "-"
        cpu = f"{r['cpu_seconds']:.1f}s" if r["cpu_seconds"] is not None else "-"
        served = r["server_stats"]
        extra = (f"  {served['requests']:,} requests, {served['bytes_out'] / 1e6:.1f} MB out, "
                 f"{served['clients']} clients" if served else "")
        display.result(f"{r['host']:<10} {r['role']:<8} {r['rank']:>4} {r['pid'] or '-':>8} "
                       f"{r['state']:<14} {_fmt_secs(r['uptime']):>7} {cpu:>7} {mem:>9}{extra}")


def _supervision(m: JobManifest, states: dict[str, ProcState]) -> tuple[dict[str, Any], str]:
    """Who keeps the job running, for ``--json`` and in words: a detached job runs on by
    itself; a supervised one ends soon after its launcher stops renewing the lease."""
    if m.lease_seconds is None:
        return {"mode": "detached"}, "detached: runs until it ends or 'dglctl stop'"
    ages = [s.lease_age for s in states.values() if s.lease_age is not None]
    age = max(ages) if ages else None  # the host that heard from the launcher least recently
    out = {"mode": "supervised", "launcher": m.launcher, "lease_seconds": m.lease_seconds,
           "lease_age": age}
    who = f"pid {m.launcher.get('pid')} on {m.launcher.get('host')}" if m.launcher else "?"
    if age is not None and age > m.lease_seconds:
        return out, (f"supervised, but its launcher ({who}) has not renewed the lease for "
                     f"{age:.0f}s: the processes are ending by themselves")
    when = f"renewed {age:.0f}s ago" if age is not None else "not renewed yet"
    return out, (f"supervised by its launcher ({who}): lease {when}; the processes end by "
                 f"themselves {m.lease_seconds:g}s after the launcher's last renewal")


def _server_stats(manifest: JobManifest, states: dict[str, ProcState]) -> dict[str, dict]:
    """Each running server's own counters (requests, bytes, clients), asked with the job token."""
    from runtime.errors import DistError
    from runtime.rpc.client import Request, ServerPool
    from runtime.rpc.ip_config import read_ip_config
    from runtime.rpc.messages import Stats

    from ..hosts.agent_client import ProcStatus

    servers = [p for p in manifest.procs if p.role == "server"
               and p.name in states and states[p.name].state is ProcStatus.RUNNING]
    if not servers:
        return {}
    try:
        machines = read_ip_config(manifest.ip_config)
        num = 1 + max(p.rank for p in manifest.procs if p.role == "server")
        pool = ServerPool(machines, num, manifest.token, manifest.timeout,
                          client_name="dglctl-status",
                          keeps_server=False, encrypt=manifest.encrypt)
    except DistError:
        return {}
    try:
        pool.connect()
        replies = pool.call_many([Request(p.host, p.rank, Stats()) for p in servers])
        return {p.name: dataclasses.asdict(r) for p, r in zip(servers, replies, strict=True)}
    except DistError:
        return {}
    finally:
        pool.close()


@click.command()
@click.argument("job", required=False)
@click.option("--all", "stop_all", is_flag=True, help="Stop every job that is not stopped.")
@click.option("--grace", type=float, default=10.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL.")
@click.pass_obj
def stop(app: Any, job: str | None, stop_all: bool, grace: float) -> None:
    """Stop JOB on every host: SIGTERM its process groups, SIGKILL after --grace, remove its
    shared memory. Only processes recorded in the job's manifest are touched."""
    from ..jobs.manifest import JobManifest, list_jobs
    from ..jobs.stop import stop_job

    display = app.display()
    if stop_all == (job is not None):
        raise ConfigError("give a JOB or --all")
    jobs = [m for m in list_jobs() if m.state.active] if stop_all else [JobManifest.load(job)]
    if not jobs:
        display.result("no running jobs")
    for m in jobs:
        clients = _clients(m)
        try:
            already = m.state.ended
            outcome = stop_job(m, clients, display=display, grace=grace)
        finally:
            _close(clients)
        if already and not outcome.signalled:
            display.result(f"job {m.job_id} is already {m.state}; nothing to stop")
        else:
            display.result(f"job {m.job_id} stopped ({outcome.signalled} process group(s) "
                           "signalled)")
        if outcome.survivors:
            raise HostError(f"job {m.job_id}: {outcome.survivors} survived SIGKILL",
                              hint="see 'dglctl status' and the hosts' process tables")


@click.command()
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option("--host", "host_name", default=None, help="Only this host.")
@click.option("--role", type=click.Choice(["server", "trainer"]), default=None,
              help="Only this role.")
@click.pass_obj
def logs(app: Any, job: str, follow: bool, host_name: str | None, role: str | None) -> None:
    """Print JOB's logs, each line prefixed [host role rank]."""
    from ..hosts.agent_client import ProcStatus
    from ..jobs.manifest import JobManifest
    from ..jobs.observe import LogStream, probe_job

    display = app.display()
    m = JobManifest.load(job)
    procs = [p for p in m.procs if (host_name is None or m.hosts[p.host].name == host_name)
             and (role is None or p.role == role)]
    if not procs:
        raise ConfigError(f"job {job}: no process matches --host {host_name} --role {role}")
    clients = _clients(m)
    stream = LogStream(clients, m.job_id, procs, whole_lines=follow)
    try:
        while True:
            lines, read = stream.poll()
            for line in lines:
                display.line(line)
            if not follow:
                if read:  # a log longer than one read: read on until the end
                    continue
                return
            states = probe_job(clients, m)
            if not any(s.state is ProcStatus.RUNNING for s in states.values()):
                for line in stream.poll()[0]:  # what they wrote since the last poll
                    display.line(line)
                return
            time.sleep(0.5)
    finally:
        _close(clients)


COMMANDS = [status, stop, logs]
