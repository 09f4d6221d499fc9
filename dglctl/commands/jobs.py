"""Job commands on recorded jobs: ``status``, ``stop``, ``logs``."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from click.shell_completion import CompletionItem

from ..agent.protocol import GRACE_SECONDS
from ..errors import ConfigError, DglctlError, HostError

if TYPE_CHECKING:
    from ..display import Display
    from ..hosts.agent_client import AgentClient, LogStart, ProcState
    from ..jobs.manifest import JobManifest
    from ..jobs.observe import LogLine, LogStream
    from ..jobs.stop import StopOutcome


def _clients(manifest: JobManifest) -> list[AgentClient]:
    from ..hosts.agent_client import AgentClient
    from ..jobs.manifest import transports_for

    return [AgentClient(t) for t in transports_for(manifest)]


def _close(clients: list[AgentClient]) -> None:
    for c in clients:
        c.close_session()
        c.transport.close()


def complete_job_ids(ctx: click.Context, param: click.Parameter,
                     incomplete: str) -> list[CompletionItem]:
    """Shell completion of a JOB argument: the recorded job ids that start with what was
    typed, newest first, each with its state and script as help (zsh and fish show it)."""
    from ..jobs.manifest import list_jobs

    try:
        jobs = list_jobs()
    except OSError:  # an unreadable DGLCTL_HOME: nothing to offer, never a traceback
        return []
    return [CompletionItem(j.job_id, help=f"{j.state}, {Path(j.script).name}")
            for j in reversed(jobs) if j.job_id.startswith(incomplete)]


def _fmt_secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m"


@click.command()
@click.argument("job", required=False, shell_complete=complete_job_ids)
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(app: Any, job: str | None, json_mode: bool) -> None:
    """Show JOB's processes on every host (or list jobs without JOB)."""
    from ..hosts.agent_client import ProcState, ProcStatus
    from ..jobs.manifest import JobManifest, JobState, list_jobs
    from ..jobs.observe import probe_job

    display = app.display(json_mode)
    if job is None:
        jobs = [_settle(j, None) for j in list_jobs()]
        display.json([{"job": j.job_id, "state": j.state, "script": j.script,
                       "hosts": [h.name for h in j.hosts], "created": j.created,
                       "result": j.result} for j in jobs])
        if not jobs:
            display.result("no jobs")
        for j in jobs:
            when = time.strftime('%Y-%m-%d %H:%M', time.localtime(j.created))
            phase = j.result.get("phase") if j.state == JobState.FAILED else None
            display.result(f"{j.job_id}  {j.state:<9}  {when}  {Path(j.script).name}  on "
                           f"{', '.join(h.name for h in j.hosts)}"
                           + (f"  (at {phase})" if phase else ""))
        return
    m = JobManifest.load(job)
    states: dict[str, ProcState] = {}
    if m.procs:  # a launch that failed before starting any asks no host
        clients = _clients(m)
        try:
            states = probe_job(clients, m)
        finally:
            _close(clients)
    m = _settle(m, states)
    alive = any(s.state is ProcStatus.RUNNING for s in states.values())
    state = m.state if m.state not in (JobState.RUNNING, JobState.STARTING) or alive \
        else JobState.STOPPED
    stats = _server_stats(m, states) if alive else {}
    caches = _trainer_caches(stats)
    rows: list[dict[str, Any]] = []
    for p in m.live_procs():
        s = states.get(p.name, ProcState(p.name, p.pgid, ProcStatus.MISSING))
        how = str(s.state)
        if s.state is ProcStatus.EXITED:
            how = f"exited {s.code}"
        elif s.state is ProcStatus.KILLED:
            how = f"killed ({s.signal})"
        if s.lease_expired is not None:
            how = "lease expired"  # ended by its wrapper: the launcher had gone
        rows.append({"host": m.hosts[p.host].name, "role": p.role, "rank": p.rank,
                     "device": p.device,
                     "attempt": p.attempt, "pid": s.pid, "pgid": p.pgid, "state": how,
                     "uptime": s.uptime,
                     "cpu_seconds": s.cpu_seconds, "rss_bytes": s.rss_bytes,
                     "server_stats": stats.get(p.name),
                     "feature_cache": caches.get(p.rank) if p.role == "trainer" else None})
    supervision, said = _supervision(m, states)
    max_restarts = int((m.cluster_record or {}).get("max_restarts", 0))
    display.json({"job": m.job_id, "state": state, "supervision": supervision,
                  "processes": rows, "result": m.result, "attempt": m.attempt,
                  "max_restarts": max_restarts,
                  "attempts": [{k: v for k, v in a.items() if k != "report"}
                               for a in m.attempts],
                  "lost_hosts": m.lost_hosts})
    display.result(f"job {m.job_id}: {state}  ({Path(m.script).name}, {len(m.hosts)} hosts)")
    if alive:
        display.result(said)
    if max_restarts:  # (a job without restarts has one attempt: its cause is said above)
        _say_attempts(display, m, max_restarts, alive)
    for lost in m.lost_hosts:
        display.result(f"host {lost['host']['name']} was lost in attempt {lost['attempt'] - 1}: "
                       f"spare {lost['spare']} took its place (part {lost['index']})")
    if m.result.get("cause") and state in (JobState.FAILED, JobState.STOPPED):
        phase = m.result.get("phase")
        display.result(f"{'failed' if state == JobState.FAILED else 'stopped'}"
                       f"{f' at {phase}' if phase else ''}: "
                       + "\n    ".join(m.result["cause"].splitlines()))
    if not m.procs:
        display.result("no process was started")
        return
    display.result(f"{'host':<10} {'role':<8} {'rank':>4} {'pid':>8} {'state':<14} "
                   f"{'uptime':>7} {'cpu':>7} {'mem':>9}")
    for r in rows:
        mem = f"{r['rss_bytes'] / 2**20:.0f}MiB" if r["rss_bytes"] else "-"
        cpu = f"{r['cpu_seconds']:.1f}s" if r["cpu_seconds"] is not None else "-"
        served = r["server_stats"]
        extra = (f"  {served['requests']:,} requests, {served['bytes_out'] / 1e6:.1f} MB out, "
                 f"{served['clients']} clients" if served else "")
        if r["device"] != "cpu":
            extra += f"  on {r['device']}"
        if r["feature_cache"]:
            extra += "  " + _cache_words(r["feature_cache"])
        display.result(f"{r['host']:<10} {r['role']:<8} {r['rank']:>4} {r['pid'] or '-':>8} "
                       f"{r['state']:<14} {_fmt_secs(r['uptime']):>7} {cpu:>7} {mem:>9}{extra}")


def _say_attempts(display: Display, m: JobManifest, max_restarts: int, alive: bool) -> None:
    """The job's attempts: each failed one with its cause, then the one under way."""
    display.result(f"attempts: {m.attempt + 1} ({m.attempt} restart(s) of at most "
                   f"{max_restarts}; 'dglctl logs {m.job_id} --attempt K' shows one)")
    for a in m.attempts:
        took = _fmt_secs(a["ended"] - a["started"]) if a.get("started") else "-"
        display.result(f"  attempt {a['attempt']}: failed after {took}: {a['cause']}")
        if a.get("point"):
            display.result(f"      at: {a['point']}")
    if not any(a["attempt"] == m.attempt for a in m.attempts):
        display.result(f"  attempt {m.attempt}: {'running' if alive else m.state}")


def _settle(m: JobManifest, states: dict[str, ProcState] | None) -> JobManifest:
    """``m``, its end recorded if its launcher is gone and none of its processes runs (from
    their exit statuses: ``observe.settled_state``), so the job list and ``status JOB`` agree.
    ``states`` None (the job list): the hosts are asked only for a job recorded as active
    whose launcher ran on this machine and is gone."""
    from ..jobs.manifest import JobState
    from ..jobs.observe import launcher_gone, probe_job, settled_state

    if m.state not in (JobState.STARTING, JobState.RUNNING) or not m.procs:
        return m
    if states is None:
        if not launcher_gone(m, {}):
            return m
        clients = _clients(m)
        try:
            states = probe_job(clients, m)
        except DglctlError:
            return m  # a host does not answer: nothing is settled
        finally:
            _close(clients)
    found = settled_state(m, states, [h.name for h in m.hosts])
    if found is None:
        return m
    state, cause = found

    def ended(rec: JobManifest) -> None:
        if rec.state in (JobState.STARTING, JobState.RUNNING):  # no one recorded it meanwhile
            rec.state = state
            rec.ended = time.time()
            if cause:
                rec.result.setdefault("cause", cause)

    m.update(ended)
    return m


def _supervision(m: JobManifest, states: dict[str, ProcState]) -> tuple[dict[str, Any], str]:
    """Who keeps the job running, for ``--json`` and in words: a detached job runs on by
    itself; a supervised one ends soon after its launcher stops renewing the lease."""
    if m.lease_seconds is None:  # a record of an older dglctl's detached job
        return {"mode": "unsupervised"}, "unsupervised: runs until it ends or 'dglctl stop'"
    ages = [s.lease_age for s in states.values() if s.lease_age is not None]
    age = max(ages) if ages else None  # the host that heard from the launcher least recently
    out = {"mode": "supervised", "launcher": m.launcher, "lease_seconds": m.lease_seconds,
           "lease_age": age}
    who = f"pid {m.launcher.get('pid')} on {m.launcher.get('host')}" if m.launcher else "?"
    if m.launcher.get("detached"):
        out["mode"] = "detached"
        who = f"its background launcher, {who}; its output: {m.launcher.get('log')}"
    if age is not None and age > m.lease_seconds:
        return out, (f"supervised, but its launcher ({who}) has not renewed the lease for "
                     f"{age:.0f}s: the processes are ending by themselves")
    when = f"renewed {age:.0f}s ago" if age is not None else "not renewed yet"
    return out, (f"supervised by its launcher ({who}): lease {when}; the processes end by "
                 f"themselves {m.lease_seconds:g}s after the launcher's last renewal")


def _trainer_caches(stats: dict[str, dict]) -> dict[int, dict[str, dict[str, int]]]:
    """Each trainer's feature-cache counters by rank, per tensor (``lookups``, ``hits``,
    ``rows``), taken out of its machine's server stats (where trainers report them)."""
    out: dict[int, dict[str, dict[str, int]]] = {}
    for served in stats.values():
        for rank, tensors in served.pop("caches", {}).items():
            out[int(rank)] = {k: dict(zip(("lookups", "hits", "rows"), v, strict=True))
                              for k, v in tensors.items()}
    return out


def _cache_words(tensors: dict[str, dict[str, int]]) -> str:
    """A trainer's feature cache in words: the share of other machines' rows its reads found
    in its copies, and how many rows it keeps."""
    lookups = sum(c["lookups"] for c in tensors.values())
    hits = sum(c["hits"] for c in tensors.values())
    rows = sum(c["rows"] for c in tensors.values())
    rate = f"{100 * hits / lookups:.0f}%" if lookups else "-"
    return f"feature cache: {rate} hits of {lookups:,} remote rows ({rows:,} kept)"


def _server_stats(manifest: JobManifest, states: dict[str, ProcState]) -> dict[str, dict]:
    """Each running server's own counters (requests, bytes, clients), asked with the job token."""
    from runtime.errors import DistError
    from runtime.rpc.client import Request, ServerPool
    from runtime.rpc.ip_config import read_ip_config
    from runtime.rpc.messages import Stats, StatsReply

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
        # call_many is typed for any reply; a server answers Stats with a StatsReply.
        return {p.name: dataclasses.asdict(cast(StatsReply, r))
                for p, r in zip(servers, replies, strict=True)}
    except DistError:
        return {}
    finally:
        pool.close()


@click.command()
@click.argument("job", required=False, shell_complete=complete_job_ids)
@click.option("--all", "stop_all", is_flag=True, help="Stop every job that is not stopped.")
@click.option("--grace", type=float, default=GRACE_SECONDS, show_default=True,
              help="Seconds between SIGTERM and SIGKILL.")
@click.option("--json", "json_mode", is_flag=True,
              help="Print a JSON list, one object per job: the groups signalled (TERM, KILL), "
                   "those left alone and why, survivors, shared-memory files removed, per host.")
@click.pass_obj
def stop(app: Any, job: str | None, stop_all: bool, grace: float, json_mode: bool) -> None:
    """Stop JOB on every host: SIGTERM its process groups, SIGKILL after --grace, remove its
    shared memory. Only processes recorded in the job's manifest are touched."""
    from ..jobs.manifest import JobManifest, list_jobs
    from ..jobs.stop import stop_job

    display = app.display(json_mode)
    if stop_all == (job is not None):
        raise ConfigError("give a JOB or --all")
    # Checked above: no JOB exactly when --all.
    jobs = ([m for m in list_jobs() if m.state.active] if job is None
            else [JobManifest.load(job)])
    if not jobs:
        display.result("no running jobs")
    records, failed = [], []
    for m in jobs:
        clients = _clients(m)
        try:
            already = m.state.ended
            outcome = stop_job(m, clients, display=display, grace=grace)
        finally:
            _close(clients)
        records.append(_stop_record(m, outcome))
        if already and not outcome.signalled:
            display.result(f"job {m.job_id} is already {m.state}; nothing to stop")
        else:
            display.result(f"job {m.job_id} stopped ({outcome.signalled} process group(s) "
                           "signalled)")
        if outcome.survivors:
            failed.append(f"job {m.job_id}: {outcome.survivors} survived SIGKILL")
    display.json(records)
    if failed:  # every job was stopped first; then the error names each survivor
        raise HostError("; ".join(failed),
                        hint="see 'dglctl status' and the hosts' process tables")


def _stop_record(m: JobManifest, outcome: StopOutcome) -> dict[str, Any]:
    """What ``stop --json`` says of one job."""
    hosts: list[dict[str, Any]] = [
        {"host": h.name, "terminated": r.terminated, "killed": r.killed,
         "skipped": r.skipped, "denied": r.denied, "survivors": r.survivors,
         "shm_removed": r.shm_removed} for h, r in zip(m.hosts, outcome.hosts, strict=True)]
    return {"job": m.job_id, "state": m.state, "signalled": outcome.signalled,
            "terminated": [n for h in hosts for n in h["terminated"]],
            "killed": [n for h in hosts for n in h["killed"]],
            "survivors": outcome.survivors, "denied": outcome.denied, "hosts": hosts}


_SAMPLERS = ("sampler processes have no log of their own: a trainer forks them and they "
             "write into its log (their lines appear among the trainer's)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhd])+")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str) -> LogStart:
    """``--since``: a duration (``30s``, ``10m``, ``2h``, ``1d``, ``1h30m``: that long ago by
    each host's clock) or an ISO time (``2024-05-01T10:00``; local time unless it names a
    zone)."""
    from datetime import datetime

    from ..hosts.agent_client import LogStart

    if _DURATION.fullmatch(text):
        return LogStart(since_ago=sum(float(n) * _UNITS[u] for n, u in
                                      re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)))
    try:
        return LogStart(since=datetime.fromisoformat(text).timestamp())
    except ValueError:
        raise ConfigError(f"--since {text!r}: not a duration or an ISO time",
                          hint="e.g. --since 30s, 10m, 2h, 1d, 1h30m, or 2024-05-01T10:00 "
                               "(local time) or 2024-05-01T10:00+00:00") from None


@click.command()
@click.argument("job", shell_complete=complete_job_ids)
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing new lines, from every host, until no process of the job "
                   "runs any more (Ctrl-C stops following: exit code 130).")
@click.option("--host", "host_name", default=None, help="Only this host (its name).")
@click.option("--role", type=click.Choice(["server", "sampler", "trainer"]), default=None,
              help="Only this role. Samplers have no log of their own: a trainer forks its "
                   "sampler processes and their output is in that trainer's log.")
@click.option("--tail", type=click.IntRange(min=0), default=None, metavar="N",
              help="Start at the last N lines of each log.")
@click.option("--since", "since_text", default=None, metavar="WHEN",
              help="Start at the lines written since WHEN: a duration (30s, 10m, 2h, 1d, "
                   "1h30m) or an ISO time. Lines carry no timestamp: each host's agent notes "
                   "the size of a log whenever it reads it (at most once a second; the "
                   "launcher reads every 0.3 s while it supervises the job, 'logs -f' every "
                   "0.5 s), and a log starts at its last note before WHEN, so no line since "
                   "WHEN is left out but earlier ones may be included (a note on stderr says "
                   "when; a log with no note before WHEN starts at its beginning). With "
                   "--tail too, the later of the two starts.")
@click.option("--attempt", type=click.IntRange(min=0), default=None, metavar="K",
              help="The trainers' logs of attempt K of a restarted job (0: the first; "
                   "'dglctl status JOB' lists them), with the servers'. [default: the "
                   "attempt under way, or the last]")
@click.option("--json", "json_mode", is_flag=True,
              help='One JSON object per line: {"host", "role", "rank", "line"}.')
@click.pass_obj
def logs(app: Any, job: str, follow: bool, host_name: str | None, role: str | None,
         tail: int | None, since_text: str | None, attempt: int | None,
         json_mode: bool) -> None:
    """Print JOB's logs whole, each line prefixed [host role rank], each log in turn (with
    -f, lines as they come, from every host)."""
    from ..hosts.agent_client import LogStart
    from ..jobs.manifest import JobManifest
    from ..jobs.observe import LogStream

    display = app.display(json_mode)
    m = JobManifest.load(job)
    if role == "sampler":
        raise ConfigError(f"job {m.job_id}: --role sampler: {_SAMPLERS}",
                          hint=f"use 'dglctl logs {m.job_id} --role trainer'")
    names = [h.name for h in m.hosts]
    if host_name is not None and host_name not in names:
        raise ConfigError(f"job {m.job_id} has no host {host_name!r}; its hosts: "
                          f"{', '.join(names)}")
    if attempt is not None and attempt > m.attempt:
        raise ConfigError(f"job {m.job_id} has no attempt {attempt}: its attempts are 0.."
                          f"{m.attempt}", hint=f"see 'dglctl status {m.job_id}'")

    def wanted(p: Any) -> bool:
        return ((host_name is None or names[p.host] == host_name)
                and (role is None or p.role == role))

    chosen = [p for p in _attempt_procs(m, attempt) if wanted(p)]
    procs = [p for p in chosen if not p.lost]
    if len(procs) < len(chosen):
        gone = ", ".join(h["host"]["name"] for h in m.lost_hosts)
        display.error(f"job {m.job_id}: the logs of {len(chosen) - len(procs)} process(es) "
                      f"are lost with their host ({gone})")
    if not procs:
        raise ConfigError(f"job {m.job_id}: no {role or 'process'} on "
                          f"{host_name or 'any host'}", hint="see 'dglctl status " f"{m.job_id}'")
    since = parse_since(since_text) if since_text is not None else LogStart()
    start = LogStart(tail=tail, since=since.since, since_ago=since.since_ago)
    clients = _clients(m)
    stream = LogStream(clients, m.job_id, procs, start=start)

    def emit(lines: Iterable[LogLine]) -> None:
        for line in lines:
            if json_mode:
                display.json_line(line.as_json())
            else:
                display.line(line.prefixed())

    try:
        first, _ = stream.read()  # every log's first read: one call per host
        if since_text is not None:
            _note_since(display, stream, since_text, since)
        if follow:
            # Polled twice a second for as long as the job runs: one agent per host.
            for c in clients:
                c.open_session()
            _follow(m, clients, stream, first, emit, wanted if attempt is None else None)
        else:
            by_log: dict[str, list[LogLine]] = {p.name: [] for p in procs}
            for line in first:
                by_log[line.proc.name].append(line)
            for p in procs:  # each log whole, in turn
                emit(by_log.pop(p.name))
                emit(stream.drain([p.name]))
    except BrokenPipeError:  # 'dglctl logs JOB | head': the reader has gone; so do we
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        _close(clients)


def _attempt_procs(m: JobManifest, attempt: int | None) -> list[Any]:
    """The processes of attempt ``attempt`` (None: the one under way): its trainers, and the
    servers (which every attempt shares)."""
    if attempt is None:
        return m.live_procs()
    return [p for p in m.procs if p.role != "trainer" or p.attempt == attempt]


def _follow(m: JobManifest, clients: list[AgentClient], stream: LogStream,
            first: list[LogLine], emit: Callable[[Iterable[LogLine]], None],
            wanted: Callable[[Any], bool] | None) -> None:
    """Print lines as they come until no process of the job runs, then the rest. With
    ``wanted``, the processes of a restart (a new attempt's trainers) are followed too."""
    from ..hosts.agent_client import ProcStatus
    from ..jobs.manifest import JobManifest
    from ..jobs.observe import probe_job

    emit(first)
    while True:
        if not any(stream.more(n) for n in stream.procs):
            if wanted is not None:
                m = JobManifest.load(m.job_id)
                for p in m.live_procs():
                    if p.name not in stream.procs and wanted(p):
                        stream.track(p)
            states = probe_job(clients, m)
            if not any(s.state is ProcStatus.RUNNING for s in states.values()):
                emit(stream.drain())  # what they wrote before they ended
                return
            time.sleep(0.5)
        emit(stream.read()[0])


def _note_since(display: Display, stream: LogStream, since_text: str, start: LogStart) -> None:
    """Say on stderr of each log that starts well before --since, and why."""
    from ..agent.protocol import MARK_EVERY

    wanted = start.since if start.since is not None else time.time() - (start.since_ago or 0)
    for name, chunk in stream.chunks.items():
        if chunk.mark is None or wanted - chunk.mark <= 2 * MARK_EVERY:
            continue
        label = stream.label(stream.procs[name])
        if chunk.mark == 0.0 or chunk.start == 0:
            display.info(f"{label} its log has no time mark before --since {since_text}: "
                         "printed from its beginning, so earlier lines are included")
        else:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(chunk.mark))
            display.info(f"{label} lines carry no time: printed from where its log ended at "
                         f"{when}, its last time mark before --since {since_text}, so lines "
                         "written in between may be included too")


COMMANDS = [status, stop, logs]
