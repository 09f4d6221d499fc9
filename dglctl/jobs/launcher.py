"""Launch and supervise a job on every host: preflight, plan, copy, servers, trainers, teardown.

One teardown path: any failure, a non-zero exit of any process, Ctrl-C, SIGTERM or SIGHUP
raise out of the supervision loop into a single ``finally`` that stops every recorded process
group on every host (TERM, grace period, KILL) and removes the job's shared memory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..agent.protocol import lease_seconds, renew_interval
from ..config import ClusterConfig, Host
from ..display import Display, Progress, human_bytes
from ..errors import (
    EXIT_INTERNAL,
    ConfigError,
    DglctlError,
    GroupError,
    HostFailure,
    Interrupted,
    JobFailed,
    PreflightError,
    user_facing,
)
from ..hosts.agent_client import AgentClient, PreflightReport, ProcState
from ..hosts.group import fan_out
from ..hosts.netif import interface_of
from ..hosts.transport import Transport
from ..hosts.transports import make_transport
from .detach import supervisor_log
from .manifest import HostRecord, JobManifest, JobState, ProcRecord, dglctl_home, new_job_id
from .observe import LogStream, failure_report, probe_job
from .plan import (
    JobPlan,
    LaunchOptions,
    ProcSpec,
    attempt_spec,
    choose_ports,
    host_bytes,
    plan_job,
    select_hosts,
)
from .preflight import (
    ask_hosts,
    bytes_to_copy,
    host_problems,
    judge,
    learn_addresses,
    preflight_ports,
)
from .project import IGNORE_FILE, WARN_BYTES, collect_project, entry_in, own_output
from .renewer import LeaseRenewer
from .restarts import (
    SAME_POINT_ATTEMPTS,
    Failure,
    attempt_record,
    lost_record,
    permanent_failure,
    repeated_point,
)
from .stop import GRACE_SECONDS, stop_job
from .sync import SyncResult, sync_files

if TYPE_CHECKING:  # partitioner (numpy) is imported when a launch reads its partition
    from partitioner.format import PartConfig

__all__ = ["GRACE_SECONDS", "LaunchOptions", "Launcher", "read_part_config"]

STEPS = 5
RESERVE_TRIES = 5  # port blocks tried when other launches reserve each one first


def _some(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``names``, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


class _Signalled(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_on_signals() -> dict[int, Any]:
    def handler(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        raise _Signalled(signum)

    return {sig: signal.signal(sig, handler)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def read_part_config(opts: LaunchOptions, cluster: ClusterConfig) -> PartConfig:
    """The partition's config, checked against the cluster (enough hosts), the script (exists)
    and the files on this machine (present, right sizes; checksums are compared on the hosts
    after copying)."""
    from partitioner.format import read_config, verify_files

    cfg = read_config(opts.part_config)
    select_hosts(cluster, cfg.num_parts, cfg.where)
    if opts.script is not None and not opts.script.is_file():
        raise ConfigError(f"training script {opts.script}: no such file")
    problems = verify_files(cfg, list(range(cfg.num_parts)), checksums=False)
    if problems:
        raise ConfigError(
            f"{cfg.where}: the partition is incomplete:\n  " + "\n  ".join(problems[:10]),
            hint="re-run 'dglctl partition', or 'dglctl inspect' to see every problem")
    return cfg


class Launcher:
    """One ``dglctl launch``: owns the transports, the plan and the manifest of the job."""

    def __init__(self, cluster: ClusterConfig, opts: LaunchOptions, display: Display,
                 transport_factory: Callable[[Host, ClusterConfig], Transport] = make_transport,
                 job_id: str | None = None) -> None:
        """``job_id``: the id a detached launch made for the job this launcher supervises in
        the background (``jobs/detach.py``); else a new one."""
        self.cluster = cluster
        self.opts = opts
        self.display = display
        self.detached = job_id is not None
        self.job_id = job_id or new_job_id()
        self.token = secrets.token_hex(16)
        self.part_cfg = read_part_config(opts, cluster)
        self.hosts = select_hosts(cluster, self.part_cfg.num_parts, self.part_cfg.where)
        # A script beside its data (or, on the local cluster, beside the hosts' workspaces)
        # must not ship the partition, the workspaces or the job records as its project.
        # Nor the job's shared-memory folder, nor the launcher's own output (``> run.log``).
        shm = cluster.env.get("DGLCTL_SHM_DIR")
        self.project = collect_project(opts.project_root, exclude=[
            self.part_cfg.dir, dglctl_home(),
            *(Path(os.path.expanduser(h.workspace)) for h in cluster.hosts),
            *([Path(os.path.expanduser(shm))] if shm else [])], exclude_files=own_output())
        self.script_rel = entry_in(self.project, opts)
        if self.project.bytes > WARN_BYTES:
            display.info(f"warning: the project {self.project.root} is "
                         f"{human_bytes(self.project.bytes)} ({len(self.project.files)} files), "
                         f"shipped to every host; list what they do not need in {IGNORE_FILE}")
        if cluster.spares and not cluster.max_restarts:
            display.info(f"warning: the spare hosts of {cluster.path} are taken only by a "
                         "restart: set max_restarts (or --max-restarts) for a lost host to be "
                         "replaced")
        self._transport_factory = transport_factory
        self.transports = [transport_factory(h, cluster) for h in self.hosts]
        self.clients = [AgentClient(t) for t in self.transports]
        self.plan: JobPlan | None = None
        self.manifest: JobManifest | None = None
        self.logs = LogStream(self.clients, self.job_id)
        self.local_ip_config = dglctl_home() / "jobs" / f"{self.job_id}.ip_config.txt"
        # The job ends soon after its launcher (a detached job's: its background one) does.
        self.lease = lease_seconds(cluster.timeout, cluster.lease)
        self.renewer: LeaseRenewer | None = None
        self._progress: Progress | None = None
        self._phase = "start"  # the step the launch is in, recorded if it fails there
        self._reserved = False  # ports reserved on the hosts, released when the launch ends
        self._failure: Failure | None = None  # what the last failed check found
        self._retired: set[str] = set()  # processes a restart stopped: not failures
        self._attempt_started = time.time()
        self._reports: list[PreflightReport] = []  # each host's preflight (a spare's, once taken)
        self._lost: set[int] = set()  # hosts lost and not (yet) replaced by a spare

    def dry_run(self) -> JobPlan:
        """The plan, without contacting any host: configured workspaces and port base."""
        return self._plan(self.cluster.port_base)

    def _plan(self, port_base: int, reports: list[PreflightReport] | None = None) -> JobPlan:
        """The plan; with the hosts' preflight ``reports``, their cores and interfaces."""
        cores = ifnames = None
        if reports is not None:
            cores = [r.cpus for r in reports]
            ifnames = [interface_of(t.host.data_address, r.interfaces)
                       for t, r in zip(self.transports, reports, strict=True)]
        return plan_job(self.cluster, self.opts, part_config=self.part_cfg, job_id=self.job_id,
                        token=self.token, workspaces=[t.workspace for t in self.transports],
                        pythons=[t.python() for t in self.transports], port_base=port_base,
                        cores=cores, ifnames=ifnames, project_dir=self.project.host_dir,
                        script_rel=self.script_rel)

    # --- steps -------------------------------------------------------------------------------
    def run(self) -> int:
        """The whole launch; returns the exit code (0 when every trainer succeeded)."""
        old = _raise_on_signals()
        started = False
        try:
            if any(t.processes_need_session for t in self.transports):
                # Each command a job step (srun: a few hundred ms): from the preflight on,
                # one step per node answers them all.
                fan_out(self.clients, lambda i, c: c.open_session())
            self._step(1, "preflight", self.preflight)
            # From the ports' reservation on: it holds while the lease is renewed.
            self.renewer = LeaseRenewer(self.clients, self.job_id,
                                        renew_interval(self.lease),
                                        call_timeout=self.lease).start()
            self._step(2, "copy", self.copy)
            started = True
            self._step(3, "servers", self.start_servers)
            self._step(4, "trainers", self.start_trainers)
            self._phase = "running"
            self.display.info(f"[5/{STEPS}] running job {self.job_id} (Ctrl-C stops it on every "
                              "host)")
            return self.supervise()
        except _Signalled as s:
            name = signal.Signals(s.signum).name
            self.display.error(f"{name}: stopping job {self.job_id} on every host")
            self._record_end(JobState.STOPPED, f"stopped on {name} during {self._phase}")
            raise Interrupted(f"job {self.job_id} stopped on {name}", signum=s.signum) from None
        except BaseException as e:
            found = user_facing(e)
            cause = found[0] if found else f"internal error: {type(e).__name__}: {e}"
            self._record_end(JobState.FAILED, cause)
            raise
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            if self.renewer is not None:
                self.renewer.stop()  # the teardown ends the job; so would the lapsed lease
            if started and self.manifest is not None:
                self.teardown()
            if self._reserved:
                self._release_ports()
            for c in self.clients:
                c.close_session()
            for t in self.transports:
                t.close()

    def _record_end(self, state: JobState, cause: str) -> None:
        """Record how the launch ended (failed or stopped) and why, with the phase it was in,
        so that 'dglctl status' says what happened: a launch that fails at preflight or the
        copy gets a record too (with no processes). A state already recorded as ended (a
        failure the supervision named, a stop from elsewhere) is kept."""
        if self.manifest is None:
            self._init_manifest(None)
        m = self.manifest
        assert m is not None  # set just above when it was missing
        if m.state not in (JobState.FAILED, JobState.STOPPED):
            m.state = state
        m.result.setdefault("phase", self._phase)
        m.result.setdefault("cause", cause)
        m.ended = m.ended or time.time()
        m.save()
        if not m.procs:  # nothing ran, so no teardown will name the job: say where it is
            self.display.info(f"job {self.job_id} is recorded as {m.state} at {self._phase}; "
                              f"'dglctl status {self.job_id}' shows it")

    def _step(self, i: int, name: str, fn: Callable[[], None]) -> None:
        self._phase = name
        t0 = time.perf_counter()
        self.display.info(f"[{i}/{STEPS}] {name} ...")
        fn()
        self.display.info(f"      {name} done in {time.perf_counter() - t0:.1f}s")

    def _set_state(self, state: JobState) -> None:
        assert self.manifest is not None
        self.manifest.state = state
        self.manifest.save()

    def preflight(self) -> None:
        """Every host: reachable, same Python and dglctl, ports free, disk space; then the plan
        on the ports found free (``jobs.preflight`` holds the checks, shared with ``check``)."""
        reports = ask_hosts(self.clients, preflight_ports(self.cluster),
                            gpus=self.cluster.gpus_per_host > 0)
        self.cluster, self.hosts = learn_addresses(self.cluster, self.hosts, reports)
        for t, h, r in zip(self.transports, self.hosts, reports, strict=True):
            t.workspace, t.host, t.cluster = r.workspace, h, self.cluster
        # One agent per host from here on, now that every host answered its preflight: the
        # checksums, port reservations and copy, then supervision's polls, cost a line each
        # way, not a Python start per call per host (over SSH, a channel too).
        fan_out(self.clients, lambda i, c: c.open_session())
        result = judge(self.cluster, self.hosts, reports, part_cfg=self.part_cfg,
                       to_copy=self._bytes_to_copy,
                       explicit_port=self.opts.port_base_explicit)
        if result.problems or result.ports is None:
            raise PreflightError(result.problems)
        self._reports = list(reports)
        base = self._reserve_ports(result.ports[0],
                                   set().union(*(r.ports_busy for r in reports)))
        if base != self.cluster.port_base:
            k = self.cluster.servers_per_host
            self.display.info(f"      ports {self.cluster.port_base}.. are in use; using "
                              f"{base}..{base + k}")
        self.plan = self._plan(base, reports)

    def _reserve_ports(self, base: int, busy: set[int]) -> int:
        """Reserve the port block at ``base`` on every host (``agent/ports.py``), and return
        its base; where another launch reserved a port of it first (both were told it was
        free), release this launch's and choose the next free block. So two launches at the
        same moment never start servers on one port."""
        k = self.cluster.servers_per_host
        for _ in range(RESERVE_TRIES):
            block = list(range(base, base + k + 1))
            self._reserved = True
            answers = fan_out(self.clients, functools.partial(self._reserve_on, block))
            clash = {p: j for a in answers for p, j in a.items()}
            if not clash:
                return base
            self._release_ports()
            if self.opts.port_base_explicit:
                raise PreflightError([
                    f"port(s) {', '.join(map(str, sorted(clash)))} of --port-base {base} are "
                    f"reserved by job {', '.join(sorted(set(clash.values())))}, launched on "
                    "these hosts at the same time"],
                    hint="leave --port-base out (a free block is chosen), or give another one")
            busy |= set(clash)
            chosen = choose_ports(self.cluster, busy)
            if chosen is None:
                raise PreflightError(["no free server ports found: the free ones were "
                                      "reserved by launches on these hosts at the same time"])
            base = chosen[0]
        raise PreflightError([f"no port block could be reserved in {RESERVE_TRIES} tries: "
                              "other launches on these hosts took each one first"])

    def _reserve_on(self, block: list[int], i: int, client: AgentClient) -> dict[int, str]:
        """Reserve ``block`` on host ``i``: the ports other jobs hold ({} when reserved)."""
        return client.reserve(self.job_id, block, self.lease)

    def _release_ports(self) -> None:
        """Remove this launch's port reservations on every host that answers."""
        self._reserved = False
        for c in self.clients:
            # Best effort, as the launch ends: a host lost (its transport broken, whatever the
            # library raises) lets its reservations lapse with the lease.
            with contextlib.suppress(Exception):
                c.release(self.job_id)

    def _bytes_to_copy(self, i: int) -> int:
        """Bytes of host ``i``'s partition files still to copy there (``bytes_to_copy``)."""
        return bytes_to_copy(self.clients[i], self.part_cfg, i)

    def copy(self) -> None:
        """Each host gets its part, the config files and the script; unchanged files are skipped."""
        from runtime.rpc.ip_config import write_ip_config

        plan = self._require_plan()
        # Kept beside the job's manifest (not in /tmp, where every launch left a folder).
        self.local_ip_config.parent.mkdir(parents=True, exist_ok=True)
        write_ip_config(self.local_ip_config, list(plan.ip_config))
        self._init_manifest(plan)
        t0 = time.perf_counter()
        self._progress = self.display.progress("copy")
        try:
            # Hosts whose workspace is this machine's file system (a cluster's shared home):
            # one after another, so that what the first wrote the next finds in place.
            shared = fan_out(self.transports, lambda i, t: t.shares_workspace())
            if any(shared):
                names = ", ".join(h.name for h, s in zip(self.hosts, shared, strict=True) if s)
                self.display.info(f"      the workspace is on a file system this machine "
                                  f"shares with {names}: each file is written once, here")
            apart = fan_out(self.clients, lambda i, c: None if shared[i] else
                            self._copy_host(i, c))
            stats = [r if r is not None else self._copy_host(i, c)
                     for i, (c, r) in enumerate(zip(self.clients, apart, strict=True))]
        finally:
            self._progress.finish()
        dt = max(time.perf_counter() - t0, 1e-6)
        for h, r in zip(self.hosts, stats, strict=True):
            note = (f"{r.files} file(s), {r.bytes / 1e6:.1f} MB, {r.bytes / 1e6 / dt:.0f} MB/s"
                    if r.files else "up to date")
            if r.removed:
                note += (f"; removed {len(r.removed)} file(s) an earlier launch shipped that "
                         f"are no longer in the project: {_some(r.removed)}")
            self.display.info(f"      {h.name}: {note}")
        changed = sorted({rel for r in stats for rel in r.changed})
        vanished = sorted({rel for r in stats for rel in r.vanished})
        said = []
        if changed:
            said.append(f"changed while copied, sent as read: {_some(changed)}")
        if vanished:
            said.append(f"deleted while copied, left out: {_some(vanished)}")
        if said:
            self.display.info(f"warning: project files {'; '.join(said)}")

    def _copy_host(self, i: int, client: AgentClient) -> SyncResult:
        plan = self._require_plan()
        hp, t = plan.hosts[i], client.transport
        files = self.part_cfg.files
        data_rel = f"data/{plan.graph_name}"
        shards = sync_files(client, self.part_cfg.dir, data_rel, hp.files,
                            {r: (files[r]["size"], files[r]["xxh3_128"]) for r in hp.files},
                            self._progress)
        p = self.project
        # The project is the user's live folder: what changes meanwhile is sent as read.
        project = sync_files(client, p.root, p.host_dir, [f.rel for f in p.files],
                             {f.rel: (f.size, f.xxh3_128) for f in p.files}, self._progress,
                             strict=False)
        gone = set(project.vanished)  # deleted here: there too
        # Only what an earlier launch shipped goes: a job's outputs in the copy stay.
        project.removed = client.prune(t.path(p.host_dir),
                                       [f.rel for f in p.files if f.rel not in gone],
                                       t.path(p.shipped_record))
        t.put(self.part_cfg.file, f"{data_rel}/{plan.graph_name}.json")
        t.put(self.local_ip_config, f"jobs/{self.job_id}/ip_config.txt")
        project.files += shards.files
        project.bytes += shards.bytes
        return project

    def _require_plan(self) -> JobPlan:
        if self.plan is None:
            raise RuntimeError("the launch has no plan yet: preflight comes first")
        return self.plan

    def _init_manifest(self, plan: JobPlan | None) -> None:
        """The job's manifest, recorded: its hosts as ``plan`` places them, or without a plan
        (a launch that failed at preflight) as the cluster config names them."""
        hosts = ([HostRecord(h.name, h.address, h.data_address, h.workspace)
                  for h in plan.hosts] if plan is not None else
                 [HostRecord(h.name, h.address, h.data_address, t.workspace)
                  for h, t in zip(self.hosts, self.transports, strict=True)])
        self.manifest = JobManifest(
            job_id=self.job_id, token=self.token,
            cluster=self.cluster.source(), cluster_record=self.cluster.record(),
            script=self.opts.entry, args=list(self.opts.script_args),
            part_config=str(self.part_cfg.file), ip_config=str(self.local_ip_config),
            hosts=hosts, shm_dir=plan.shm_dir if plan is not None else None,
            encrypt=self.cluster.encrypt, lease_seconds=self.lease, timeout=self.cluster.timeout,
            launcher={"pid": os.getpid(), "host": socket.gethostname(),
                      **({"detached": True, "log": str(supervisor_log(self.job_id))}
                         if self.detached else {})})
        self.manifest.save()

    def _start(self, spec: ProcSpec, attempt: int = 0) -> None:
        assert self.manifest is not None
        client = self.clients[spec.host]
        t = client.transport
        # The env (with the job token) travels as a 0600 file, never on a command line.
        t.put_bytes(json.dumps(dict(spec.env)).encode(),
                    f"jobs/{self.job_id}/{spec.name}.env.json", mode=0o600)
        started = client.start(self.job_id, spec.name, spec.cwd, spec.argv, lease=self.lease,
                               grace=self.cluster.timeout)
        rec = ProcRecord(spec.name, spec.host, spec.role, spec.rank, started.pgid, started.log,
                         spec.port, attempt, device=spec.env.get("DGLCTL_DEVICE", "cpu"))
        self.manifest.procs.append(rec)
        self.manifest.save()
        # The host keeps its own record (without the token), for whoever logs in there; named
        # by host, as hosts sharing a workspace (an NFS home) share the job's folder too.
        mine = [asdict(p) for p in self.manifest.live_procs() if p.host == spec.host]
        t.put_bytes(json.dumps({"job_id": self.job_id, "host": spec.host_name,
                                "machine_id": spec.host, "processes": mine}, indent=1).encode(),
                    f"jobs/{self.job_id}/manifest.{spec.host_name}.json")
        self.logs.track(rec)

    def start_servers(self, specs: Sequence[ProcSpec] | None = None, attempt: int = 0) -> None:
        """Start every server (or ``specs``, as attempt ``attempt``: a restart), then wait
        until each listens on its port (a server binds only once its partition is loaded).
        Each host's agent checks its own servers: the launcher may not reach the data network
        (compute nodes behind a login node); a server that cannot bind its port exits, and
        that is seen as its failure."""
        plan = self._require_plan()
        specs = plan.servers if specs is None else specs
        for spec in specs:
            self._start(attempt_spec(spec, attempt), attempt)
        if attempt == 0:
            self._set_state(JobState.STARTING)
        ports = [sorted(s.port for s in specs if s.host == hp.index and s.port)
                 for hp in plan.hosts]
        wait = max(60.0, self.cluster.timeout * 6)
        deadline = time.monotonic() + wait
        while True:
            self._check_processes()  # a server that died while loading fails fast
            up = fan_out(self.clients, lambda i, c: c.listening(plan.hosts[i].data_address,
                                                                ports[i]) if ports[i] else set())
            waiting = [f"{hp.name} ({', '.join(map(str, sorted(set(ports[i]) - up[i])))})"
                       for i, hp in enumerate(plan.hosts) if set(ports[i]) - up[i]]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise JobFailed(f"servers did not all listen within {wait:.0f}s: still waiting "
                                f"on {', '.join(waiting)}; see 'dglctl logs {self.job_id}'")
            self._pump_logs()
            time.sleep(0.1)

    def start_trainers(self, attempt: int = 0) -> None:
        """Start trainers with the torch.distributed environment and the runtime contract
        (for a restart, as attempt ``attempt``: see ``plan.attempt_spec``)."""
        for spec in self._require_plan().trainers:
            self._start(attempt_spec(spec, attempt), attempt)
        self._attempt_started = time.time()
        self._set_state(JobState.RUNNING)

    # --- supervision -------------------------------------------------------------------------
    def _check_processes(self) -> dict[str, ProcState]:
        assert self.manifest is not None
        states = probe_job(self.clients, self.manifest)
        failed = [s for s in states.values() if s.failed and s.name not in self._retired]
        if failed:
            self._pump_logs()
            if JobManifest.load(self.job_id).state in (JobState.STOPPING, JobState.STOPPED):
                # 'dglctl stop' from elsewhere: the processes it ended did not fail.
                self.manifest.state = JobState.STOPPED
                raise Interrupted(f"job {self.job_id} was stopped by 'dglctl stop'")
            message, result = failure_report(self.manifest, failed,
                                             [h.name for h in self.hosts], self._tail)
            self.manifest.result = result
            self._failure = Failure(failed, message, result)
            raise JobFailed(message)
        return states

    def _tail(self, rec: ProcRecord) -> list[str]:
        return self.clients[rec.host].tail(self.job_id, [rec.name], 15).get(rec.name, [])

    def _pump_logs(self) -> None:
        """Print new log lines of every process, prefixed ``[host role rank]``."""
        lines, _ = self.logs.poll()
        for line in lines:
            self.display.line(line)

    def supervise(self) -> int:
        """Stream logs and watch every process until all trainers end or one fails; while
        restarts remain (``max_restarts``), a failed attempt's trainers are started again."""
        while True:
            try:
                self._pump_logs()
                states = self._check_processes()
            except (JobFailed, GroupError) as e:
                if not self._recover(e):
                    raise
                continue
            trainers = [s for n, s in states.items() if n.startswith("trainer")]
            if all(s.succeeded for s in trainers):
                self._pump_logs()
                assert self.manifest is not None
                self.manifest.state = JobState.SUCCEEDED
                self.display.info(f"job {self.job_id}: every trainer finished")
                return 0
            time.sleep(0.3)

    def _recover(self, error: DglctlError) -> bool:
        """After a failed check (processes failed: JobFailed; hosts did not answer:
        GroupError), with restarts allowed: find the hosts that are lost and restart (True).
        False: the error ends the job (raised by the caller)."""
        if self.cluster.max_restarts == 0:
            if isinstance(error, JobFailed):
                self._restart({})  # records the attempt; never restarts
            return False
        lost = self._find_lost()
        if isinstance(error, GroupError) and not lost:
            return False  # a host answered with an error: not a fault a restart mends
        return self._restart(lost)

    def _find_lost(self) -> dict[int, str]:
        """The hosts whose agent no longer answers (index -> why). A host that does not
        answer is asked again over a new connection (the old one may be all that broke),
        which replaces the old one when the host answers it."""
        wait = max(10.0, self.cluster.timeout)

        def ask(i: int, c: AgentClient) -> AgentClient | HostFailure | None:
            try:
                c.renew(self.job_id, timeout=wait)
                return None
            except Exception:  # noqa: BLE001 - judged below, over a new connection
                pass
            fresh = AgentClient(self._fresh_transport(c.host, c.transport.workspace))
            try:
                fresh.renew(self.job_id, timeout=wait)
            except Exception as e:  # noqa: BLE001 - each host's failure is its answer
                with contextlib.suppress(Exception):
                    fresh.transport.close()
                failure = HostFailure.of(c.host.name, e)
                if failure.exit_code == EXIT_INTERNAL:
                    raise
                return failure
            return fresh

        lost = {}
        for i, found in enumerate(fan_out(self.clients, ask)):
            if isinstance(found, HostFailure):
                lost[i] = found.message
            elif isinstance(found, AgentClient):
                self.display.info(f"      {self.hosts[i].name}: reconnected")
                self._swap_client(i, found)
        return lost

    def _fresh_transport(self, host: Host, workspace: str) -> Transport:
        t = self._transport_factory(host, self.cluster)
        t.workspace = workspace
        return t

    def _swap_client(self, i: int, client: AgentClient) -> None:
        """``client`` takes host ``i``'s place (in the lists the lease renewer and the log
        stream read); the old one is closed, quietly (its connection may hang)."""
        old = self.clients[i]
        client.open_session()
        self.clients[i], self.transports[i] = client, client.transport
        with contextlib.suppress(Exception):
            old.close_session()
            old.transport.close()

    def _restart(self, lost: dict[int, str]) -> bool:
        """After a failed check: record the attempt's end; if it may be restarted, stop its
        trainers (the servers and their shared memory stay), give each ``lost`` host's place
        to a spare, start the trainers again as the next attempt and return True. False: the
        failure ends the job (raised by the caller), except a failure that repeats at one
        point or a lost host no spare can replace, which raise their own JobFailed."""
        m, failure = self.manifest, self._failure
        assert m is not None and (failure is not None or lost)
        self._mark_lost(set(lost))
        if lost:
            record = lost_record(m.attempt, self._attempt_started,
                                 {self.hosts[i].name: why for i, why in lost.items()}, failure)
        else:
            assert failure is not None
            record = attempt_record(m.attempt, self._attempt_started, failure)
        m.attempts.append(record)
        m.save()
        if failure is None:  # the check raised (a lost host) before it saw the processes
            self._failure = failure = Failure([], record["report"], {"cause": record["cause"]})
        limit = self.cluster.max_restarts
        if limit == 0:
            return False
        if permanent_failure(failure) is not None:
            m.result["restarts"] = m.attempt
            raise JobFailed(record["report"] + f"\n(not restarted: the error says every attempt "
                            f"would fail the same way; {limit - m.attempt} restart(s) left "
                            "unused)")
        if m.attempt >= limit:
            failure_note = (f"\n(after {limit} restart{'s' if limit > 1 else ''}: every "
                            "attempt failed; 'dglctl status' lists their causes)")
            m.result["restarts"] = m.attempt
            raise JobFailed(record["report"] + failure_note)
        if len(lost) > len(self.cluster.spares):
            m.result["restarts"] = m.attempt
            raise JobFailed(f"job {self.job_id}: {record['report']}\nno spare host is left to "
                            "take its place", hint=f"list spare hosts under 'spares:' in "
                            f"{self.cluster.path}; they take a lost host's part and processes")
        point = repeated_point(m.attempts)
        if point is not None:
            m.result["restarts"] = m.attempt
            first = m.attempts[-SAME_POINT_ATTEMPTS]
            raise JobFailed(
                f"job {self.job_id} failed {SAME_POINT_ATTEMPTS} times at the same point "
                f"({point}): a bug in the "
                f"script, not a fault; not restarting it again ({limit - m.attempt} restart(s) "
                f"left). The first of them, attempt {first['attempt']}:\n{first['report']}")
        self._pump_logs()
        self.display.error(f"job {self.job_id}: attempt {m.attempt} failed: {record['cause']}")
        dead = sorted({rec.host for rec in m.live_procs() if rec.role == "server"
                       and rec.name in {s.name for s in failure.failed}} - set(lost))
        again = ", ".join(self.hosts[h].name for h in dead)
        moved = ", ".join(self.hosts[h].name for h in sorted(lost))
        self.display.info(
            f"restarting the trainers: attempt {m.attempt + 1} (restart {m.attempt + 1} of "
            f"{limit}); " + "".join(
                (f"the servers of {moved} start on a spare, " if lost else "",
                 f"the servers of {again} start again from the shards there, " if dead else "",
                 "the others keep the graph loaded" if lost or dead else
                 "the servers keep the graph loaded")))
        self._stop_trainers(skip=set(lost))
        m.attempt += 1
        m.result = {}
        self._failure = None
        if lost:
            self._take_spares(sorted(lost), m.attempt)
        if dead:
            self._restart_servers(dead, m.attempt)
        self.start_trainers(m.attempt)
        return True

    def _mark_lost(self, lost: set[int]) -> None:
        """The processes of the ``lost`` hosts are lost with them: recorded so (never probed,
        stopped or read again), and the teardown passes those hosts by."""
        assert self.manifest is not None
        gone = [p for p in self.manifest.procs if p.host in lost and not p.lost]
        for p in gone:
            p.lost = True
        self.logs.forget(p.name for p in gone)
        self._lost |= lost
        self.manifest.save()

    def _take_spares(self, lost: list[int], attempt: int) -> None:
        """Give each of the ``lost`` hosts' places to a spare (the first of the cluster's
        spares that passes preflight): its processes are marked lost, the spare gets the
        host's part and the project, every host a new ip_config.txt, and the spare's servers
        start as attempt ``attempt``. A spare that fails preflight is passed over (and
        said); none left is a JobFailed."""
        m, plan = self.manifest, self._require_plan()
        assert m is not None
        for i in lost:
            old = self.hosts[i]
            client, report = self._spare_for(i)
            spare = client.host
            self.display.info(f"host {old.name} is lost: spare {spare.name} takes its place "
                              f"(part {i}); the logs of its processes are lost with it")
            spares = tuple(h for h in self.cluster.spares if h.name != spare.name)
            hosts = list(self.cluster.hosts)
            hosts[i] = spare
            self.cluster = replace(self.cluster, hosts=tuple(hosts), spares=spares)
            self.cluster, self.hosts = learn_addresses(
                self.cluster, select_hosts(self.cluster, self.part_cfg.num_parts,
                                           self.part_cfg.where),
                [*self._reports[:i], report, *self._reports[i + 1:]])
            client.transport.host, client.transport.cluster = self.hosts[i], self.cluster
            client.transport.workspace = report.workspace
            self._reports[i] = report
            self._lost.discard(i)
            self._swap_client(i, client)
            m.lost_hosts.append({"index": i, "host": asdict(m.hosts[i]), "spare": spare.name,
                                 "attempt": attempt, "when": time.time()})
        self.plan = plan = self._plan(plan.port_base, self._reports)
        m.hosts = [HostRecord(h.name, h.address, h.data_address, h.workspace)
                   for h in plan.hosts]
        m.save()
        from runtime.rpc.ip_config import write_ip_config

        write_ip_config(self.local_ip_config, list(plan.ip_config))
        t0 = time.perf_counter()
        self._progress = self.display.progress("copy")
        try:
            copied = fan_out([self.clients[i] for i in lost],
                             lambda k, c: self._copy_host(lost[k], c))
        finally:
            self._progress.finish()
        for i, r in zip(lost, copied, strict=True):
            self.display.info(f"      {self.hosts[i].name}: {r.files} file(s), "
                              f"{r.bytes / 1e6:.1f} MB copied")
        # The others' trainers must find the spare's servers (and MASTER_ADDR, for host 0).
        fan_out(self.clients, lambda i, c: c.transport.put(
            self.local_ip_config, f"jobs/{self.job_id}/ip_config.txt"))
        # Nothing of the job should be on a spare; where it shares its shared-memory folder
        # with the lost host (two containers of one machine), the lost servers' files are
        # there, and would be taken for its own servers' graph.
        fan_out([self.clients[i] for i in lost], lambda k, c: c.stop(
            self.job_id, {}, grace=self.cluster.timeout, shm_dir=m.shm_dir,
            shm_machines=[lost[k]]))
        self.start_servers([s for s in plan.servers if s.host in lost], attempt)
        for i in lost:
            self.display.info(f"      {self.hosts[i].name} serves part {i} "
                              f"({time.perf_counter() - t0:.1f}s after the copy began)")

    def _spare_for(self, i: int) -> tuple[AgentClient, PreflightReport]:
        """The first spare that passes host ``i``'s preflight (versions, workspace, disk for
        part ``i``, the job's ports free), connected; spares that fail are dropped."""
        plan = self._require_plan()
        ports = list(range(plan.port_base, plan.port_base + self.cluster.servers_per_host))
        if i == 0:
            ports.append(plan.master_port)
        while self.cluster.spares:
            spare = self.cluster.spares[0]
            client = AgentClient(self._fresh_transport(spare, spare.workspace))
            try:
                report = client.preflight(spare.data_address, ports,
                                          gpus=self.cluster.gpus_per_host > 0, job=self.job_id)
                client.transport.workspace = report.workspace
                problems = list(host_problems(
                    spare, report, host_bytes(self.part_cfg, i),
                    functools.partial(bytes_to_copy, client, self.part_cfg, i),
                    gpus=self.cluster.gpus_per_host,
                    visible=self.cluster.env.get("CUDA_VISIBLE_DEVICES")).values())
                busy = sorted(set(ports) & report.ports_busy)
                if busy:
                    problems.append(f"host {spare.name}: port(s) {', '.join(map(str, busy))} "
                                    "of the job are in use")
                elif not problems and (taken := client.reserve(self.job_id, ports, self.lease)):
                    problems.append(f"host {spare.name}: port(s) "
                                    f"{', '.join(map(str, sorted(taken)))} of the job were "
                                    f"just reserved by job {', '.join(sorted(set(taken.values())))}")
            except Exception as e:  # noqa: BLE001 - a spare that fails is passed over
                failure = HostFailure.of(spare.name, e)
                if failure.exit_code == EXIT_INTERNAL:
                    raise
                problems = [failure.message]
            if not problems:
                return client, report
            with contextlib.suppress(Exception):
                client.transport.close()
            self.display.error(f"spare {spare.name} cannot take {self.hosts[i].name}'s place: "
                               + "; ".join(problems))
            self.cluster = replace(self.cluster, spares=self.cluster.spares[1:])
        raise JobFailed(f"job {self.job_id}: host {self.hosts[i].name} is lost and no spare "
                        "host is left that can take its place",
                        hint=f"see the spares' problems above; spares are listed under "
                             f"'spares:' in {self.cluster.path}")

    def _restart_servers(self, hosts: list[int], attempt: int) -> None:
        """Stop every server of ``hosts`` (a backup maps its main server's shared memory,
        which goes with it), remove those machines' shared memory, and start them again as
        attempt ``attempt`` from the shards already on their hosts."""
        assert self.manifest is not None
        shm_dir = self.manifest.shm_dir
        self._retire([p for p in self.manifest.live_procs()
                      if p.role == "server" and p.host in hosts],
                     lambda host: {"shm_dir": shm_dir, "shm_machines": [host]})
        self.start_servers([s for s in self._require_plan().servers if s.host in hosts],
                           attempt)

    def _stop_trainers(self, skip: Collection[int] = ()) -> None:
        """Stop the trainers of the attempt under way on every host but ``skip`` (lost
        hosts), leaving the servers and the job's shared memory."""
        assert self.manifest is not None
        self._retire([p for p in self.manifest.live_procs()
                      if p.role == "trainer" and p.host not in skip],
                     lambda host: {"keep_shm": True})

    def _retire(self, procs: list[ProcRecord],
                shm: Callable[[int], dict[str, Any]]) -> None:
        """Stop ``procs`` on their hosts (``shm(host)``: what the stop does with the host's
        shared memory), read their logs to the end and stop following them; their ends are
        not failures."""
        per_host = [{p.name: p.pgid for p in procs if p.host == i} for i in range(len(self.hosts))]
        fan_out(self.clients, lambda i, c: c.stop(self.job_id, per_host[i],
                                                  grace=self.cluster.timeout, **shm(i))
                if per_host[i] else None)
        names = [p.name for p in procs]
        self._retired.update(names)
        for line in self.logs.drain(names):
            self.display.line(line.prefixed())
        self.logs.forget(names)

    def teardown(self) -> None:
        """Stop every recorded process group on every host and remove shared memory."""
        assert self.manifest is not None
        stop_job(self.manifest, self.clients, display=self.display, skip=self._lost)
