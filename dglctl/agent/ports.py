"""Port reservations on a host: how two launches that choose their ports at the same moment
never choose the same ones.

Preflight only tells which ports nothing listens on yet; between that answer and the
servers' bind, another launch may be told the same. So once a launch has chosen its block it
reserves it on every host (``reserve``), one file per port in a folder all users share, made
with ``link(2)``, which fails if the file exists: of two launches only one gets a port, and the
other chooses again. A reservation holds while its job's lease on the host is renewed (the
reserving call renews it first), so a launcher that is killed leaves none behind for longer
than it leaves processes; a job's end releases its reservations (``release``). Preflight
counts the reserved ports of other jobs as busy.

Standard library only: the agent imports this on every host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .lease import age, renew
from .protocol import LEASE_NAME
from .workspace import job_dir, private_dir

# A reservation file being written (between its link and its content, none: the content is
# written first) is never seen; one unreadable this long after its making is stale.
UNREADABLE_GRACE = 10.0


def reservations_dir() -> Path:
    """The host's folder of port reservations, shared by every user (sticky, like /tmp)."""
    folder = Path(tempfile.gettempdir()) / "dglctl-ports"
    folder.mkdir(exist_ok=True)
    with contextlib.suppress(PermissionError):  # another user made it, and made it so
        if folder.stat().st_mode & 0o7777 != 0o1777:
            os.chmod(folder, 0o1777)
    return folder


def _holder(path: Path) -> str | None:
    """The job whose live reservation ``path`` is; None when it is stale or gone."""
    try:
        data = json.loads(path.read_text())
        lease_age = age(Path(data["lease"]))
        if lease_age is not None and lease_age <= float(data["lease_seconds"]):
            return str(data["job"])
        return None
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime < UNREADABLE_GRACE:
                return "?"
        return None


def reserved(ports: Iterable[int], but: str | None = None) -> set[int]:
    """Which of ``ports`` a job (other than ``but``) holds a live reservation of here."""
    folder = reservations_dir()
    return {p for p in ports if _holder(folder / str(p)) not in (None, but)}


def _take(folder: Path, port: int, content: str) -> bool:
    """Make ``port``'s reservation file with ``content``, atomically; False if it exists."""
    tmp = folder / f".{port}.{os.getpid()}.tmp"
    tmp.write_text(content)
    try:
        os.link(tmp, folder / str(port))
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def cmd_reserve(args: argparse.Namespace) -> dict[str, Any]:
    """Reserve each of --ports for --job, all or none: ``{"taken": {port: holder}}`` names
    the ports other jobs hold (then this call reserved nothing)."""
    lease = private_dir(job_dir(args.workspace, args.job)) / LEASE_NAME
    renew(lease)  # the reservation holds from now while the launcher renews the lease
    folder = reservations_dir()
    content = json.dumps({"job": args.job, "lease": str(lease),
                          "lease_seconds": args.lease_seconds, "pid": os.getpid()})
    made: list[Path] = []
    taken: dict[str, str] = {}
    for port in [int(p) for p in args.ports.split(",") if p]:
        path = folder / str(port)
        for _ in range(2):  # the second time after removing a stale reservation
            if _take(folder, port, content):
                made.append(path)
                break
            holder = _holder(path)
            if holder == args.job:
                break  # ours already (a repeated call)
            if holder is not None:
                taken[str(port)] = holder
                break
            with contextlib.suppress(FileNotFoundError, PermissionError):
                path.unlink()  # stale; another user's stays, and counts as taken below
        else:
            taken[str(port)] = _holder(path) or "a stale reservation of another user"
    if taken:
        for path in made:
            path.unlink(missing_ok=True)
    return {"taken": taken}


def release(job: str) -> list[int]:
    """Remove the reservations ``job`` holds on this host; return their ports."""
    released = []
    for path in reservations_dir().iterdir():
        if path.name.isdigit() and _holder_job(path) == job:
            with contextlib.suppress(FileNotFoundError, PermissionError):
                path.unlink()
                released.append(int(path.name))
    return sorted(released)


def cmd_release(args: argparse.Namespace) -> dict[str, Any]:
    """Remove the reservations --job holds on this host."""
    return {"released": release(args.job)}


def _holder_job(path: Path) -> str | None:
    """The job named in reservation ``path``, live or not."""
    try:
        return str(json.loads(path.read_text())["job"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
