"""The job's processes on this host: ``start`` one detached under the wrapper, the wrapper
itself (``wrap``), ``probe`` their states, ``stop`` them, ``renew`` the lease, and whether the
servers ``listen`` yet.

Each started process runs under a small wrapper (``agent wrap``) that leads its own process
group, records the child's pid, and writes the child's exit status when it ends, so the
launcher can tell "exited with code 3" from "killed by signal 9" from "missing". Pids are
recycled: the agent records who leads each group (start time, boot), and a stop signals a group
only while that leader still does. A supervised job's wrappers also watch the job's lease
(``agent/lease.py``): when the launcher stops renewing it, they end their processes and remove
the job's shared memory themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .lease import LeaseWatch, renew
from .lease import age as lease_age
from .ports import release
from .proc_groups import (
    alive,
    identity,
    leader_state,
    live_groups,
    members,
    proc_stats,
    signal_groups,
    wait_ended,
)
from .protocol import (
    AGENT_MODULE,
    LEASE_NAME,
    ProcState,
    ProcStatus,
    Started,
    StopReport,
)
from .workspace import job_dir, open_private, private_dir, read_json, write_private


def cmd_start(args: argparse.Namespace) -> dict[str, Any]:
    """Start ``argv`` detached (own session) under the wrapper; return the group id, after
    recording who leads it (``NAME.leader.json``)."""
    job = job_dir(args.workspace, args.job)
    private_dir(job.parent)
    private_dir(job)
    name = args.name
    env = dict(os.environ)
    env_file = job / f"{name}.env.json"
    if env_file.exists():
        env.update(json.loads(env_file.read_text()))
        env_file.unlink()  # the job token is in it: keep it on disk no longer than needed
    log = open_private(job / f"{name}.log", os.O_APPEND)
    wrapper = [sys.executable, "-m", AGENT_MODULE, "wrap", "--rc", str(job / f"{name}.rc"),
               "--pidfile", str(job / f"{name}.pid")]
    if args.lease is not None:
        renew(job / LEASE_NAME)  # the lease runs from now, whenever the launcher renews next
        wrapper += ["--lease", str(job / LEASE_NAME), "--lease-seconds", str(args.lease),
                    "--grace", str(args.grace), "--job", args.job,
                    "--shm-dir", env.get("DGLCTL_SHM_DIR", "")]
    wrapper += ["--", *json.loads(args.argv)]
    proc = subprocess.Popen(wrapper, cwd=os.path.expanduser(args.cwd), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(log)
    STARTED.setdefault(args.job, (env.get("DGLCTL_SHM_DIR") or None, []))[1].append(proc.pid)
    # Read while the wrapper is this process's child: even if it has exited already, it is
    # not reaped before this agent exits, so its pid cannot name another process yet.
    leader = identity(proc.pid)
    write_private(job / f"{name}.leader.json", json.dumps(leader))
    return Started(proc.pid, str(job / f"{name}.log"), leader).to_json()


# The process groups this agent started, by job (with the job's shared-memory folder): what
# a session that ends with its Slurm step cleans up after (``end_with_step``).
STARTED: dict[str, tuple[str | None, list[int]]] = {}
STEP_END_WAIT = 3.0  # seconds for the step's processes to end on TERM (Slurm's KillWait: 30)


def end_started() -> None:
    """End the process groups this agent started (TERM; KILL after ``STEP_END_WAIT`` s),
    then remove their jobs' shared memory and sampler folders, which no process of a job
    removes (the servers' files outlive them)."""
    for job, (shm_dir, pgids) in STARTED.items():
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pgid in live_groups(pgids):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, sig)
            wait_ended(pgids, STEP_END_WAIT)
        _remove_job_files(job, shm_dir)


def end_with_step() -> None:
    """For a session that is its Slurm step: on SIGTERM (scancel, the time limit: every
    process of the step gets it at once) end what it started and clean up, then exit 143.
    (Its end of input, the launcher gone, calls ``end_started`` too: see ``__main__``.)"""
    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        end_started()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def cmd_wrap(args: argparse.Namespace) -> int:
    """Run the child, keep the group alive until it ends, record its exit status. With a
    lease, end the child (and its group) when the lease has been silent too long."""
    # The cluster YAML may name the program under "~" (python: ~/venvs/x/bin/python).
    child = subprocess.Popen([os.path.expanduser(args.argv[0]), *args.argv[1:]])
    write_private(Path(args.pidfile), str(child.pid))
    # A signal to the group reaches the child directly; the wrapper only waits for it.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    record: dict[str, Any] = {}
    if args.lease is None:
        code = child.wait()
    else:
        code, silent = _wait_leased(child, args)
        if silent is not None:
            record["lease_expired"] = round(silent, 1)
    write_private(Path(args.rc), json.dumps({"code": code, "time": time.time(), **record}))
    return 0


def _wait_leased(child: subprocess.Popen, args: argparse.Namespace) -> tuple[int, float | None]:
    """Wait for the child while the lease is renewed: ``(its exit code, None)``. Once the lease
    is silent for ``--lease-seconds``: TERM the group, KILL what is left after ``--grace``,
    remove the job's shared memory here; ``(the child's code, seconds of silence)``."""
    watch = LeaseWatch(Path(args.lease))
    poll = min(1.0, args.lease_seconds / 10)
    while True:
        try:
            return child.wait(timeout=poll), None
        except subprocess.TimeoutExpired:
            pass
        silent = watch.silence()
        if silent > args.lease_seconds:
            break
    print(f"dglctl agent: job {args.job}: its launcher has not renewed the job's lease for "
          f"{silent:.0f}s (the limit is {args.lease_seconds:g}s): it was killed "
          "or lost its connection to this host; stopping this process (a job launched with "
          "--detach runs without its launcher)", file=sys.stderr, flush=True)
    group = os.getpgid(0)
    os.killpg(group, signal.SIGTERM)  # this wrapper ignores it
    try:
        code = child.wait(timeout=args.grace)
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    for pid in members(group):  # what the child started and left behind
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _remove_job_files(args.job, args.shm_dir or None)
    return code, silent


def _remove_job_files(job_id: str, shm_dir: str | None, keep_shm: bool = False,
                      machines: list[int] | None = None) -> int:
    """Remove the job's shared memory (in ``shm_dir``, default /dev/shm; of ``machines`` only
    when given; none with ``keep_shm``) and its trainers' sampler socket folders here; how
    many shared-memory files were removed."""
    from runtime.store.shm import job_files, sampler_dirs

    root = Path(os.path.expanduser(shm_dir)) if shm_dir else None
    shm: list[Path] = []
    if not keep_shm:
        for machine in machines if machines is not None else [None]:
            shm += job_files(job_id, root, machine)
    for f in shm:
        f.unlink(missing_ok=True)
    for d in sampler_dirs(job_id):  # left by trainers that could not clean up (killed)
        shutil.rmtree(d, ignore_errors=True)
    return len(shm)


def _leader(job: Path, name: str, pgid: int) -> str:
    """Whether group ``pgid`` is still the one the agent started as ``name`` (see
    :func:`~dglctl.agent.proc_groups.leader_state`)."""
    return leader_state(read_json(job / f"{name}.leader.json"), pgid)


def _state(job: Path, name: str, pgid: int) -> dict[str, Any]:
    """The agent's JSON of process ``name``'s state (``_proc_state``)."""
    return _proc_state(job, name, pgid).to_json()


def _proc_state(job: Path, name: str, pgid: int) -> ProcState:
    """What the job's files here and the process table say of process ``name``."""
    out: dict[str, Any] = {"name": name, "pgid": pgid}
    rc = read_json(job / f"{name}.rc")
    if rc is None and alive(pgid) and _leader(job, name, pgid) != "other":
        pid_text = (job / f"{name}.pid").read_text() if (job / f"{name}.pid").exists() else ""
        out["state"] = ProcStatus.RUNNING
        out["lease_age"] = lease_age(job / LEASE_NAME)  # None: no lease (detached)
        if pid_text.strip().isdigit():
            out.update(pid=int(pid_text), **proc_stats(int(pid_text)))
        return ProcState(**out)
    if rc is None:
        # The wrapper writes the exit status and then exits: between the first read and the
        # liveness check it may have done both, so only a second read tells "exited" from
        # "killed together with its wrapper" (a clean job was once reported as missing).
        rc = read_json(job / f"{name}.rc")
    if rc is None:
        # No exit status and no process: killed with its wrapper.
        return ProcState(**out, state=ProcStatus.MISSING)
    code = rc["code"]
    out.update(state=ProcStatus.EXITED if code >= 0 else ProcStatus.KILLED,
               code=code if code >= 0 else None, signal=-code if code < 0 else None,
               ended=rc["time"], lease_expired=rc.get("lease_expired"))
    if code != 0 and isinstance(err := read_json(job / f"{name}.error.json"), dict):
        m = raw if isinstance(raw := err.get("message"), dict) else {}
        # The uncaught exception (runtime.error_file), and the batch it came in (if known).
        out["error"] = {"message": str(m.get("message", ""))[:2000], "file": m.get("file"),
                        "line": m.get("line"), "at": m.get("at"),
                        "permanent": bool(m.get("permanent"))}
    if alive(pgid) and _leader(job, name, pgid) != "other":
        out["stragglers"] = True  # the child ended but something else of its group lives on
    return ProcState(**out)


def cmd_probe(args: argparse.Namespace) -> dict[str, Any]:
    """State of each named process of the job on this host."""
    job = job_dir(args.workspace, args.job)
    procs = json.loads(args.procs)  # {name: pgid}
    return {name: _state(job, name, int(pgid)) for name, pgid in procs.items()}


def cmd_listening(args: argparse.Namespace) -> dict[str, Any]:
    """Which of --ports accept a connection on --address, asked from this host: a server
    binds its port only once its partition is loaded, so listening means ready. The launcher
    asks here, as it may not reach the data network itself (hosts behind a login node)."""
    up = []
    for port in [int(p) for p in args.ports.split(",") if p]:
        with contextlib.suppress(OSError):
            socket.create_connection((args.address, port), timeout=1.0).close()
            up.append(port)
    return {"listening": up}


def cmd_renew(args: argparse.Namespace) -> dict[str, Any]:
    """Renew the job's lease here (its supervising launcher does, every half timeout)."""
    job = job_dir(args.workspace, args.job)
    renew(private_dir(job) / LEASE_NAME)
    return {"renewed": time.time()}


def cmd_stop(args: argparse.Namespace) -> dict[str, Any]:
    """TERM each recorded group that still runs as the job's, KILL after the grace period,
    remove the job's shared memory (in --shm-dir: the DGLCTL_SHM_DIR its processes were
    given; default /dev/shm; not with --keep-shm) and its trainers' sampler socket folders."""
    job = job_dir(args.workspace, args.job)
    procs = {name: int(pgid) for name, pgid in json.loads(args.procs).items()}
    targets, skipped = _stoppable(job, procs)
    signalled, denied = signal_groups(targets, signal.SIGTERM)
    targets = {n: g for n, g in targets.items() if n not in denied}
    wait_ended(targets.values(), args.grace)
    # The wrapper exits once its child has, so a group may have lost its leader by now; its
    # id cannot name a new group while a member lives, so only another leader spares it.
    live = live_groups(targets.values())
    killed, refused = signal_groups({n: g for n, g in targets.items()
                                     if g in live and _leader(job, n, g) != "other"}, signal.SIGKILL)
    wait_ended(targets.values(), 5.0)
    shm_removed = _remove_job_files(args.job, args.shm_dir, keep_shm=args.keep_shm,
                                    machines=args.shm_machine)
    if not args.keep_shm and not args.shm_machine:  # the whole job ends here: its ports too
        release(args.job)
    live = live_groups(targets.values())
    survivors = [n for n, g in targets.items() if g in live and n not in refused]
    return StopReport(terminated=signalled, killed=killed, shm_removed=shm_removed,
                      survivors=survivors, denied=denied + refused, skipped=skipped,
                      states={n: _proc_state(job, n, g) for n, g in procs.items()}).to_json()


def _stoppable(job: Path, procs: dict[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """The groups to signal: not finished (no exit status), led by the process the agent
    started, and still running; and the others, with the reason they are left alone."""
    targets, skipped = {}, {}
    for name, pgid in procs.items():
        if (job / f"{name}.rc").exists():
            skipped[name] = "finished"  # never signalled: its id may be anyone's by now
        elif (who := _leader(job, name, pgid)) != "ours":
            skipped[name] = {"gone": "not running", "unknown": "no identity recorded",
                             "other": "its group id now belongs to another process"}[who]
        elif not alive(pgid):
            skipped[name] = "not running"  # its leader awaits reaping: nothing to signal
        else:
            targets[name] = pgid
    return targets, skipped
