"""The agent's files on its host: a job's folder in the workspace, and the private files it
writes there (folders 0700, files 0600: the env files hold the job token)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .protocol import JOBS_DIR


def job_dir(workspace: str, job: str) -> Path:
    """The job's folder in a host's workspace (``WORKSPACE/jobs/JOB``)."""
    return Path(os.path.expanduser(workspace)) / JOBS_DIR / job


def private_dir(folder: Path) -> Path:
    """``folder``, created if missing, entered by its owner only (0700, whatever the umask)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder.stat().st_mode & 0o777) != 0o700:
        os.chmod(folder, 0o700)  # also one the launcher's copies created before
    return folder


def open_private(path: Path, flags: int) -> int:
    """Open ``path`` for writing, created 0600 if missing, and exactly 0600 either way."""
    fd = os.open(path, flags | os.O_WRONLY | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # the umask may take the owner's bits; an old file may have more
    return fd


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, 0600 before a byte is written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        with os.fdopen(open_private(tmp, os.O_EXCL), "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        # A full disk (or a signal) between the open and the rename leaves no half-written
        # temp file beside the record: the old record, if any, stays whole.
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when it is missing or unreadable (being written)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
