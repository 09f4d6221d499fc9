"""Process groups on this host, as the host agent sees them: who leads a group (pids are
recycled), which groups still run, their CPU and memory, and signalling them.

Everything here reads /proc (Linux); without it, signal 0 decides whether a group lives and
no leader identity is recorded. Standard library only: the agent imports this on every host.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def identity(pid: int) -> dict[str, Any]:
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


def leader_state(recorded: Any, pgid: int) -> str:
    """Whether group ``pgid`` is still led by the process ``recorded`` (an :func:`identity`):
    "ours" (it runs or awaits reaping with that identity), "gone" (no process has the id),
    "other" (another has it, or the host rebooted), or "unknown" (no identity recorded:
    started by an older agent, or without /proc)."""
    if not isinstance(recorded, dict) or recorded.get("start") is None:
        return "unknown"
    now = identity(pgid)
    same_id = (now["pgid"], now["boot"]) == (recorded.get("pgid"), recorded.get("boot"))
    return "ours" if now == recorded else "gone" if same_id and now["start"] is None else "other"


def alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies waiting to be reaped do not)."""
    return pgid in live_groups([pgid])


def _proc_stat_fields() -> Iterable[tuple[int, list[bytes]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    yield int(d), f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue  # exited while we looked


def live_groups(pgids: Iterable[int]) -> set[int]:
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
        return {int(fields[2]) for _, fields in _proc_stat_fields()
                if int(fields[2]) in candidates and fields[0] not in (b"Z", b"X")}
    except OSError:
        return candidates


def members(pgid: int) -> list[int]:
    """The running processes of group ``pgid`` (empty without /proc)."""
    try:
        return [pid for pid, fields in _proc_stat_fields()
                if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")]
    except OSError:
        return []


def proc_stats(pid: int) -> dict[str, Any]:
    """CPU seconds, resident memory and uptime of a process from /proc ({} without it)."""
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


def signal_groups(groups: Mapping[str, int], sig: int) -> tuple[list[str], list[str]]:
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


def wait_ended(pgids: Iterable[int], seconds: float) -> None:
    """Until none of ``pgids`` has a running process, at most ``seconds``."""
    pgids = list(pgids)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and live_groups(pgids):
        time.sleep(0.05)
