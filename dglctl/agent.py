"""The host agent: what dglctl runs on each host (``python -m dglctl.agent CMD``), local or SSH.

Every launcher action on a host is one short agent call that prints JSON: preflight checks,
file checksums, starting a process detached in its own session, probing the job's processes,
stopping them, reading new log lines. One code path serves the local transport and SSH.

Each started process runs under a small wrapper (``agent wrap``) that leads its own process
group, records the child's pid, and writes the child's exit status when it ends, so the
launcher can tell "exited with code 3" from "killed by signal 9" from "missing".
"""

from __future__ import annotations

import argparse
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

JOBS_DIR = "jobs"


def _job_dir(workspace: str, job: str) -> Path:
    return Path(os.path.expanduser(workspace)) / JOBS_DIR / job


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


# --- preflight ---------------------------------------------------------------------------------
def cmd_preflight(args: argparse.Namespace) -> dict[str, Any]:
    """Python and dglctl versions, busy ports on the bind address, free disk, writable workspace."""
    from dglctl import __version__

    ws = Path(os.path.expanduser(args.workspace))
    writable = True
    try:
        ws.mkdir(parents=True, exist_ok=True)
        probe = ws / f".write-test-{os.getpid()}"
        probe.write_text("x")
        probe.unlink()
    except OSError:
        writable = False
    busy = []
    for port in [int(p) for p in args.ports.split(",") if p]:
        with socket.socket() as s:
            # As ZeroMQ does: a port held only by TIME_WAIT leftovers is free to listen on.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((args.bind, port))
            except OSError:
                busy.append(port)
    free = shutil.disk_usage(ws if ws.exists() else ws.parent).free if writable else 0
    return {"python": sys.version.split()[0], "executable": sys.executable, "dglctl": __version__,
            "ports_busy": busy, "disk_free": free, "workspace": str(ws),
            "workspace_writable": writable, "hostname": socket.gethostname()}


# --- files -------------------------------------------------------------------------------------
def cmd_checksums(args: argparse.Namespace) -> dict[str, Any]:
    """Size and xxh3-128 of each listed file (relative to --root); null when missing."""
    from partitioner.format import file_checksum

    root = Path(os.path.expanduser(args.root))
    out: dict[str, Any] = {}
    for rel in json.loads(args.files):
        p = root / rel
        if not p.is_file():
            out[rel] = None
        elif args.sizes_only:
            out[rel] = {"size": p.stat().st_size}
        else:
            out[rel] = {"size": p.stat().st_size, "xxh3_128": file_checksum(p)}
    return out


# --- processes ---------------------------------------------------------------------------------
def cmd_start(args: argparse.Namespace) -> dict[str, Any]:
    """Start ``argv`` detached (own session) under the wrapper; return the group id."""
    job = _job_dir(args.workspace, args.job)
    job.mkdir(parents=True, exist_ok=True)
    name = args.name
    env = dict(os.environ)
    env_file = job / f"{name}.env.json"
    if env_file.exists():
        env.update(json.loads(env_file.read_text()))
        env_file.unlink()  # the job token is in it: keep it on disk no longer than needed
    log = open(job / f"{name}.log", "ab")
    wrapper = [sys.executable, "-m", "dglctl.agent", "wrap", "--rc", str(job / f"{name}.rc"),
               "--pidfile", str(job / f"{name}.pid"), "--", *json.loads(args.argv)]
    proc = subprocess.Popen(wrapper, cwd=os.path.expanduser(args.cwd), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    log.close()
    return {"pgid": proc.pid, "log": str(job / f"{name}.log")}


def cmd_wrap(args: argparse.Namespace) -> int:
    """Run the child, keep the group alive until it ends, record its exit status."""
    # The cluster YAML may name the program under "~" (python: ~/venvs/x/bin/python).
    child = subprocess.Popen([os.path.expanduser(args.argv[0]), *args.argv[1:]])
    Path(args.pidfile).write_text(str(child.pid))
    # A signal to the group reaches the child directly; the wrapper only waits for it.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    code = child.wait()
    tmp = Path(args.rc + ".tmp")
    tmp.write_text(json.dumps({"code": code, "time": time.time()}))
    os.replace(tmp, args.rc)
    return 0


def _alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies waiting to be reaped do not)."""
    return pgid in _live_groups([pgid])


def _live_groups(pgids) -> set[int]:
    """The groups among ``pgids`` with a process that still runs, from one pass over /proc.

    A group whose processes have all exited still answers signal 0 until its zombies are
    reaped; a detached job's wrappers are reaped by init, which took 2 s on the project's VMs
    (and every stop waited for it). /proc tells the states; without /proc, signal 0 decides.
    """
    candidates = set()
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        candidates.add(pgid)
    if not candidates:
        return candidates
    try:
        entries = os.listdir("/proc")
    except OSError:
        return candidates
    live = set()
    for d in entries:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        group = int(fields[2])
        if group in candidates and fields[0] not in (b"Z", b"X"):
            live.add(group)
    return live


def _proc_stats(pid: int) -> dict[str, Any]:
    """CPU seconds and resident memory of a process from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        start = int(fields[19]) / ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return {"cpu_seconds": cpu, "rss_bytes": rss, "uptime": max(0.0, uptime - start)}
    except (OSError, IndexError, ValueError):
        return {}


def _state(job: Path, name: str, pgid: int) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "pgid": pgid}
    rc = _read_json(job / f"{name}.rc")
    if rc is None and _alive(pgid):
        pid_text = (job / f"{name}.pid").read_text() if (job / f"{name}.pid").exists() else ""
        out["state"] = "running"
        if pid_text.strip().isdigit():
            out.update(pid=int(pid_text), **_proc_stats(int(pid_text)))
        return out
    if rc is None:
        # The wrapper writes the exit status and then exits: between the first read and the
        # liveness check it may have done both, so only a second read tells "exited" from
        # "killed together with its wrapper" (a clean job was once reported as missing).
        rc = _read_json(job / f"{name}.rc")
    if rc is None:
        out["state"] = "missing"  # no exit status and no process: killed with its wrapper
        return out
    code = rc["code"]
    out.update(state="exited" if code >= 0 else "killed",
               code=code if code >= 0 else None, signal=-code if code < 0 else None,
               ended=rc["time"])
    if _alive(pgid):  # the child ended but something else of its group lives on
        out["stragglers"] = True
    return out


def cmd_probe(args: argparse.Namespace) -> dict[str, Any]:
    """State of each named process of the job on this host."""
    job = _job_dir(args.workspace, args.job)
    procs = json.loads(args.procs)  # {name: pgid}
    return {name: _state(job, name, int(pgid)) for name, pgid in procs.items()}


def cmd_stop(args: argparse.Namespace) -> dict[str, Any]:
    """TERM each recorded group, KILL after the grace period, remove the job's shared memory
    (in --shm-dir: the DGLCTL_SHM_DIR its processes were given; default /dev/shm) and its
    trainers' sampler socket folders."""
    job = _job_dir(args.workspace, args.job)
    procs = {name: int(pgid) for name, pgid in json.loads(args.procs).items()}
    signalled = []
    for name, pgid in procs.items():
        if _alive(pgid):
            try:
                os.killpg(pgid, signal.SIGTERM)
                signalled.append(name)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + args.grace
    while time.monotonic() < deadline and _live_groups(procs.values()):
        time.sleep(0.05)
    killed = []
    live = _live_groups(procs.values())
    for name, pgid in procs.items():
        if pgid in live:
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(name)
            except ProcessLookupError:
                pass
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end and _live_groups(procs.values()):
        time.sleep(0.05)
    from runtime.store.shm import job_files, sampler_dirs

    removed = 0
    shm_root = Path(os.path.expanduser(args.shm_dir)) if args.shm_dir else None
    for f in job_files(args.job, shm_root):
        f.unlink(missing_ok=True)
        removed += 1
    for d in sampler_dirs(args.job):  # left by trainers that could not clean up (killed)
        shutil.rmtree(d, ignore_errors=True)
    live = _live_groups(procs.values())
    survivors = [n for n, g in procs.items() if g in live]
    return {"terminated": signalled, "killed": killed, "shm_removed": removed,
            "survivors": survivors, "states": {n: _state(job, n, g) for n, g in procs.items()}}


def cmd_logs(args: argparse.Namespace) -> dict[str, Any]:
    """New bytes of each log since the given offsets (at most --max bytes per log)."""
    job = _job_dir(args.workspace, args.job)
    out = {}
    for name, offset in json.loads(args.offsets).items():
        path = job / f"{name}.log"
        try:
            with open(path, "rb") as f:
                f.seek(int(offset))
                data = f.read(args.max)
        except FileNotFoundError:
            data = b""
        out[name] = {"offset": int(offset) + len(data), "text": data.decode("utf-8", "replace")}
    return out


def cmd_tail(args: argparse.Namespace) -> dict[str, Any]:
    """The last lines of each named log."""
    job = _job_dir(args.workspace, args.job)
    out = {}
    for name in json.loads(args.names):
        try:
            with open(job / f"{name}.log", "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            lines = []
        out[name] = lines[-args.lines:]
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse one agent command, run it, print its JSON result (``wrap`` returns the code)."""
    p = argparse.ArgumentParser(prog="python -m dglctl.agent")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("preflight")
    s.add_argument("--workspace", required=True)
    s.add_argument("--bind", default="127.0.0.1")
    s.add_argument("--ports", default="")
    s = sub.add_parser("checksums")
    s.add_argument("--root", required=True)
    s.add_argument("--files", required=True)
    s.add_argument("--sizes-only", action="store_true")
    s = sub.add_parser("start")
    for a in ("--workspace", "--job", "--name", "--cwd", "--argv"):
        s.add_argument(a, required=True)
    s = sub.add_parser("wrap")
    s.add_argument("--rc", required=True)
    s.add_argument("--pidfile", required=True)
    s.add_argument("argv", nargs=argparse.REMAINDER)
    for name in ("probe", "stop"):
        s = sub.add_parser(name)
        s.add_argument("--workspace", required=True)
        s.add_argument("--job", required=True)
        s.add_argument("--procs", required=True)
        s.add_argument("--grace", type=float, default=10.0)
        if name == "stop":
            s.add_argument("--shm-dir", default=None,
                           help="the job's shared-memory folder [default: /dev/shm]")
    s = sub.add_parser("logs")
    s.add_argument("--workspace", required=True)
    s.add_argument("--job", required=True)
    s.add_argument("--offsets", required=True)
    s.add_argument("--max", type=int, default=1 << 20)
    s = sub.add_parser("tail")
    s.add_argument("--workspace", required=True)
    s.add_argument("--job", required=True)
    s.add_argument("--names", required=True)
    s.add_argument("--lines", type=int, default=20)
    args = p.parse_args(argv)
    if args.cmd == "wrap":
        if args.argv and args.argv[0] == "--":
            args.argv = args.argv[1:]
        return cmd_wrap(args)
    result = globals()[f"cmd_{args.cmd}"](args)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
