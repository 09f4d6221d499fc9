"""Job commands: ``launch``, ``status``, ``stop``, ``logs``."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import click

from ..errors import ConfigError, DglctlError

DEFAULT_CLUSTER = Path(__file__).resolve().parents[2] / "configs" / "local.yaml"


def _transports(manifest):
    from ..cluster_config import load_cluster_config
    from ..transport import make_transport

    cluster = load_cluster_config(manifest.cluster["path"])
    by_name = {h.name: h for h in cluster.hosts}
    out = []
    for rec in manifest.hosts:
        host = by_name.get(rec.name)
        if host is None:
            raise ConfigError(f"host {rec.name} of job {manifest.job_id} is no longer in "
                              f"{cluster.path}")
        t = make_transport(host, cluster)
        t.workspace = rec.workspace
        out.append(t)
    return out


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--cluster", "cluster_path", type=click.Path(path_type=Path), default=None,
              help=f"Cluster YAML [default: {DEFAULT_CLUSTER.relative_to(DEFAULT_CLUSTER.parents[1])}]")
@click.option("--part-config", type=click.Path(path_type=Path), required=True,
              help="The partition's JSON (from 'dglctl partition').")
@click.option("--num-servers", type=int, default=None, help="Servers per host.")
@click.option("--num-trainers", type=int, default=None, help="Trainers per host.")
@click.option("--num-samplers", type=int, default=None, help="Sampler processes per trainer.")
@click.option("--port-base", type=int, default=None, help="First server port on each host.")
@click.option("--ip-config", type=click.Path(path_type=Path), default=None,
              help="Take the hosts from a DGL ip_config.txt instead of the cluster file.")
@click.option("--detach", is_flag=True, help="Leave the job running; follow with status/logs.")
@click.pass_obj
def launch(app, script, script_args, cluster_path, part_config, num_servers, num_trainers,
           num_samplers, port_base, ip_config, detach):
    """Run SCRIPT on every host of the cluster: servers, trainers, samplers, supervised.

    \b
    Steps: preflight every host (reachable, same Python and dglctl, ports, disk), copy each
    host its part, the configs and SCRIPT (skipping unchanged files, verified by checksum),
    start servers and wait until they answer, start trainers (torch.distributed env), stream
    their output as [host role rank] lines. When any process fails, the whole job is stopped
    on every host and the root cause is printed; Ctrl-C does the same. Arguments after '--'
    go to SCRIPT.
    """
    from ..cluster_config import cluster_from_ip_config, load_cluster_config
    from ..launcher import Launcher, LaunchOptions

    if ip_config is not None:
        base = load_cluster_config(cluster_path) if cluster_path else None
        cluster = cluster_from_ip_config(ip_config, base)
    else:
        cluster = load_cluster_config(cluster_path or DEFAULT_CLUSTER)
    cluster = cluster.with_overrides(
        servers_per_host=num_servers, trainers_per_host=num_trainers,
        samplers_per_trainer=num_samplers, port_base=port_base)
    opts = LaunchOptions(script=script, script_args=list(script_args), part_config=part_config,
                         detach=detach, port_base_explicit=port_base is not None)
    launcher = Launcher(cluster, opts, app.display())
    code = launcher.run()
    if code:
        raise click.exceptions.Exit(code)


def _fmt_secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m"


@click.command()
@click.argument("job", required=False)
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(app, job, json_mode):
    """Show JOB's processes on every host (or list jobs without JOB)."""
    from ..jobs import JobManifest, list_jobs
    from ..launcher import parallel

    display = app.display(json_mode)
    if job is None:
        jobs = list_jobs()
        display.json([{"job": j.job_id, "state": j.state, "script": j.script,
                       "hosts": [h.name for h in j.hosts], "created": j.created} for j in jobs])
        if not jobs:
            display.result("no jobs")
        for j in jobs:
            display.result(f"{j.job_id}  {j.state:<9}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(j.created))}  "
                           f"{Path(j.script).name}  on {', '.join(h.name for h in j.hosts)}")
        return
    m = JobManifest.load(job)
    transports = _transports(m)
    try:
        states = {}
        for r in parallel(transports, lambda i, t: t.agent(
                "probe", "--workspace", t.workspace, "--job", m.job_id,
                "--procs", json.dumps(m.procs_on(i)))):
            states.update(r)
    finally:
        for t in transports:
            t.close()
    alive = any(s["state"] == "running" for s in states.values())
    state = m.state if m.state not in ("running", "starting") or alive else "stopped"
    stats = _server_stats(m, states) if alive else {}
    rows = []
    for p in m.procs:
        s = states.get(p.name, {"state": "missing"})
        how = s["state"]
        if how == "exited":
            how = f"exited {s.get('code')}"
        elif how == "killed":
            how = f"killed ({s.get('signal')})"
        rows.append({"host": m.hosts[p.host].name, "role": p.role, "rank": p.rank,
                     "pid": s.get("pid"), "pgid": p.pgid, "state": how,
                     "uptime": s.get("uptime"), "cpu_seconds": s.get("cpu_seconds"),
                     "rss_bytes": s.get("rss_bytes"), "server_stats": stats.get(p.name)})
    display.json({"job": m.job_id, "state": state, "processes": rows, "result": m.result})
    display.result(f"job {m.job_id}: {state}  ({Path(m.script).name}, "
                   f"{len(m.hosts)} hosts)")
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


def _server_stats(manifest, states) -> dict[str, dict]:
    """Each running server's own counters (requests, bytes, clients), asked with the job token."""
    from runtime.errors import DistError
    from runtime.rpc.client import Request, ServerPool
    from runtime.rpc.ip_config import read_ip_config
    from runtime.rpc.messages import Stats

    servers = [p for p in manifest.procs
               if p.role == "server" and states.get(p.name, {}).get("state") == "running"]
    if not servers:
        return {}
    try:
        machines = read_ip_config(manifest.ip_config)
        num = 1 + max(p.rank for p in manifest.procs if p.role == "server")
        pool = ServerPool(machines, num, manifest.token, 3.0, client_name="dglctl-status",
                          keeps_server=False)
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
def stop(app, job, stop_all, grace):
    """Stop JOB on every host: SIGTERM its process groups, SIGKILL after --grace, remove its
    shared memory. Only processes recorded in the job's manifest are touched."""
    from ..jobs import JobManifest, list_jobs
    from ..launcher import stop_job

    display = app.display()
    if stop_all == (job is not None):
        raise ConfigError("give a JOB or --all")
    jobs = [m for m in list_jobs() if m.state in ("starting", "running", "stopping")] if stop_all \
        else [JobManifest.load(job)]
    if not jobs:
        display.result("no running jobs")
    for m in jobs:
        transports = _transports(m)
        try:
            already = m.state in ("stopped", "succeeded", "failed")
            result = stop_job(m, transports, grace=grace)
        finally:
            for t in transports:
                t.close()
        acted = sum(len(h["terminated"]) + len(h["killed"]) for h in result["hosts"])
        if already and not acted:
            display.result(f"job {m.job_id} is already {m.state}; nothing to stop")
        else:
            display.result(f"job {m.job_id} stopped ({acted} process group(s) signalled)")
        if result["survivors"]:
            raise DglctlError(f"job {m.job_id}: {result['survivors']} survived SIGKILL")


@click.command()
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option("--host", "host_name", default=None, help="Only this host.")
@click.option("--role", type=click.Choice(["server", "trainer"]), default=None,
              help="Only this role.")
@click.pass_obj
def logs(app, job, follow, host_name, role):
    """Print JOB's logs, each line prefixed [host role rank]."""
    from ..jobs import JobManifest
    from ..launcher import parallel

    display = app.display()
    m = JobManifest.load(job)
    transports = _transports(m)
    procs = [p for p in m.procs if (host_name is None or m.hosts[p.host].name == host_name)
             and (role is None or p.role == role)]
    if not procs:
        raise ConfigError(f"job {job}: no process matches --host {host_name} --role {role}")
    offsets = {p.name: 0 for p in procs}
    try:
        while True:
            def fetch(i, t):
                names = {p.name: offsets[p.name] for p in procs if p.host == i}
                return t.agent("logs", "--workspace", t.workspace, "--job", m.job_id,
                               "--offsets", json.dumps(names)) if names else {}

            for result in parallel(transports, fetch):
                for name, chunk in result.items():
                    p = next(q for q in procs if q.name == name)
                    text = chunk["text"]
                    cut = text.rfind("\n") + 1 if follow else len(text)
                    offsets[name] += len(text[:cut].encode())
                    for line in text[:cut].splitlines():
                        display.line(f"[{m.hosts[p.host].name} {p.role} {p.rank}] {line}")
            if not follow:
                return
            states = {}
            for r in parallel(transports, lambda i, t: t.agent(
                    "probe", "--workspace", t.workspace, "--job", m.job_id,
                    "--procs", json.dumps(m.procs_on(i)))):
                states.update(r)
            if not any(s["state"] == "running" for s in states.values()):
                return
            time.sleep(0.5)
    finally:
        for t in transports:
            t.close()


COMMANDS = [launch, status, stop, logs]
