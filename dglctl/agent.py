"""The host agent: what dglctl runs on each host (``python -m dglctl.agent CMD``), local or SSH.

Every launcher action on a host is one short agent call that prints JSON: preflight checks,
file checksums, starting a process detached in its own session, probing the job's processes,
stopping them, reading new log lines. One code path serves the local transport and SSH.

Each started process runs under a small wrapper (``agent wrap``) that leads its own process
group, records the child's pid, and writes the child's exit status when it ends, so the
launcher can tell "exited with code 3" from "killed by signal 9" from "missing". Pids are
recycled: the agent records who leads each group (start time, boot), and a stop signals a group
only while that leader still does. What it writes is private: folders 0700, files 0600.
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


def _private_dir(folder: Path) -> Path:
    """``folder``, created if missing, entered by its owner only (0700, whatever the umask)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder.stat().st_mode & 0o777) != 0o700:
        os.chmod(folder, 0o700)  # also one the launcher's copies created before
    return folder


def _open_private(path: Path, flags: int) -> int:
    """Open ``path`` for writing, created 0600 if missing, and exactly 0600 either way."""
    fd = os.open(path, flags | os.O_WRONLY | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # the umask may take the owner's bits; an old file may have more
    return fd


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, 0600 before a byte is written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(_open_private(tmp, os.O_EXCL), "w") as f:
        f.write(text)
    os.replace(tmp, path)


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
        # Private before the launcher copies anything there (the env files hold the token).
        _private_dir(ws / JOBS_DIR)
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
    """Start ``argv`` detached (own session) under the wrapper; return the group id, after
    recording who leads it (``NAME.leader.json``)."""
    job = _job_dir(args.workspace, args.job)
    _private_dir(job.parent)
    _private_dir(job)
    name = args.name
    env = dict(os.environ)
    env_file = job / f"{name}.env.json"
    if env_file.exists():
        env.update(json.loads(env_file.read_text()))
        env_file.unlink()  # the job token is in it: keep it on disk no longer than needed
    log = _open_private(job / f"{name}.log", os.O_APPEND)
    wrapper = [sys.executable, "-m", "dglctl.agent", "wrap", "--rc", str(job / f"{name}.rc"),
               "--pidfile", str(job / f"{name}.pid"), "--", *json.loads(args.argv)]
    proc = subprocess.Popen(wrapper, cwd=os.path.expanduser(args.cwd), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(log)
    # Read while the wrapper is this process's child: even if it has exited already, it is
    # not reaped before this agent exits, so its pid cannot name another process yet.
    leader = _identity(proc.pid)
    _write_private(job / f"{name}.leader.json", json.dumps(leader))
    return {"pgid": proc.pid, "log": str(job / f"{name}.log"), "leader": leader}


def cmd_wrap(args: argparse.Namespace) -> int:
    """Run the child, keep the group alive until it ends, record its exit status."""
    # The cluster YAML may name the program under "~" (python: ~/venvs/x/bin/python).
    child = subprocess.Popen([os.path.expanduser(args.argv[0]), *args.argv[1:]])
    _write_private(Path(args.pidfile), str(child.pid))
    # A signal to the group reaches the child directly; the wrapper only waits for it.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    code = child.wait()
    _write_private(Path(args.rc), json.dumps({"code": code, "time": time.time()}))
    return 0


# --- who leads a group -------------------------------------------------------------------------
def _identity(pid: int) -> dict[str, Any]:
    """What tells process ``pid`` from a later one with the same pid: its start time in clock
    ticks since boot (field 22 of /proc/PID/stat; None: no such process) and the boot id."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        start = None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = None
    return {"pgid": pid, "start": start, "boot": boot}


def _leader(job: Path, name: str, pgid: int) -> str:
    """Whether group ``pgid`` is still the one the agent started as ``name``: "ours" (its
    leader, the wrapper, runs or awaits reaping with the recorded identity), "gone" (no
    process has that id), "other" (another has it, or the host rebooted), or "unknown" (no
    identity recorded: started by an older agent, or without /proc)."""
    rec = _read_json(job / f"{name}.leader.json")
    if not isinstance(rec, dict) or rec.get("start") is None:
        return "unknown"
    now = _identity(pgid)
    same_id = (now["pgid"], now["boot"]) == (rec.get("pgid"), rec.get("boot"))
    return "ours" if now == rec else "gone" if same_id and now["start"] is None else "other"


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
    if rc is None and _alive(pgid) and _leader(job, name, pgid) != "other":
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
    if _alive(pgid) and _leader(job, name, pgid) != "other":
        out["stragglers"] = True  # the child ended but something else of its group lives on
    return out


def cmd_probe(args: argparse.Namespace) -> dict[str, Any]:
    """State of each named process of the job on this host."""
    job = _job_dir(args.workspace, args.job)
    procs = json.loads(args.procs)  # {name: pgid}
    return {name: _state(job, name, int(pgid)) for name, pgid in procs.items()}


def cmd_stop(args: argparse.Namespace) -> dict[str, Any]:
    """TERM each recorded group that still runs as the job's, KILL after the grace period,
    remove the job's shared memory (in --shm-dir: the DGLCTL_SHM_DIR its processes were
    given; default /dev/shm) and its trainers' sampler socket folders."""
    job = _job_dir(args.workspace, args.job)
    procs = {name: int(pgid) for name, pgid in json.loads(args.procs).items()}
    targets, skipped = _stoppable(job, procs)
    signalled, denied = _signal(targets, signal.SIGTERM)
    targets = {n: g for n, g in targets.items() if n not in denied}
    _wait_ended(targets.values(), args.grace)
    # The wrapper exits once its child has, so a group may have lost its leader by now; its
    # id cannot name a new group while a member lives, so only another leader spares it.
    live = _live_groups(targets.values())
    killed, refused = _signal({n: g for n, g in targets.items()
                               if g in live and _leader(job, n, g) != "other"}, signal.SIGKILL)
    _wait_ended(targets.values(), 5.0)
    from runtime.store.shm import job_files, sampler_dirs

    shm_root = Path(os.path.expanduser(args.shm_dir)) if args.shm_dir else None
    shm = job_files(args.job, shm_root)
    for f in shm:
        f.unlink(missing_ok=True)
    for d in sampler_dirs(args.job):  # left by trainers that could not clean up (killed)
        shutil.rmtree(d, ignore_errors=True)
    live = _live_groups(targets.values())
    survivors = [n for n, g in targets.items() if g in live and n not in refused]
    return {"terminated": signalled, "killed": killed, "shm_removed": len(shm),
            "survivors": survivors, "denied": denied + refused, "skipped": skipped,
            "states": {n: _state(job, n, g) for n, g in procs.items()}}


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
        elif not _alive(pgid):
            skipped[name] = "not running"  # its leader awaits reaping: nothing to signal
        else:
            targets[name] = pgid
    return targets, skipped


def _signal(groups: dict[str, int], sig: int) -> tuple[list[str], list[str]]:
    """Send ``sig`` to each group: (names signalled, names of another user's groups)."""
    sent, denied = [], []
    for name, pgid in groups.items():
        try:
            os.killpg(pgid, sig)
            sent.append(name)
        except ProcessLookupError:
            pass  # ended meanwhile
        except PermissionError:
            denied.append(name)
    return sent, denied


def _wait_ended(pgids, seconds: float) -> None:
    """Until none of ``pgids`` has a running process, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _live_groups(pgids):
        time.sleep(0.05)


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
        for a in ("--workspace", "--job", "--procs"):
            s.add_argument(a, required=True)
        s.add_argument("--grace", type=float, default=10.0)
        if name == "stop":
            s.add_argument("--shm-dir", default=None,
                           help="the job's shared-memory folder [default: /dev/shm]")
    for name, what, limit, default in (("logs", "--offsets", "--max", 1 << 20),
                                       ("tail", "--names", "--lines", 20)):
        s = sub.add_parser(name)
        for a in ("--workspace", "--job", what):
            s.add_argument(a, required=True)
        s.add_argument(limit, type=int, default=default)
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
