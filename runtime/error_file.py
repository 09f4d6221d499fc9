"""An uncaught exception, recorded where the launcher reads it (torchrun's error file).

torchelastic's ``@record`` writes ``{"message": {"message": "Type: text", "extraInfo":
{"py_callstack": ..., "timestamp": ...}}}`` to ``$TORCHELASTIC_ERROR_FILE``; this writes the
same, plus the innermost frame's file and line and the batch the loaders were on
(:func:`note_position`) and whether it would repeat on every attempt (``permanent``: see
:class:`runtime.errors.DistError`), from a ``sys.excepthook`` that
:func:`runtime.initialize` installs, so a training script needs no decorator. The launcher
then names the exception as the root cause, not only an exit code and the last log lines.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from types import TracebackType

_installed: str | None = None
_position: dict[str, int] | None = None  # the batch the trainer is on (note_position)


def note_position(epoch: int, batch: int) -> None:
    """The training loop is on batch ``batch`` of epoch ``epoch`` (the loaders say so as they
    yield): an exception is recorded with it, so the launcher can tell a failure that
    repeats at the same point on every attempt (a bug) from a fault."""
    global _position
    _position = {"epoch": epoch, "batch": batch}


def record(path: str, exc_type: type[BaseException], exc: BaseException,
           tb: TracebackType | None) -> None:
    """Write ``exc`` to ``path`` in torchelastic's error-file format (0600, atomically)."""
    frames = traceback.extract_tb(tb)
    where = frames[-1] if frames else None
    payload = {"message": {
        "message": f"{exc_type.__name__}: {exc}",
        "extraInfo": {"py_callstack": "".join(traceback.format_exception(exc_type, exc, tb)),
                      "timestamp": str(int(time.time()))},
        "file": where.filename if where else None, "line": where.lineno if where else None,
        "at": _position, "permanent": bool(getattr(exc, "permanent", False))}}
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, path)


def install(path: str | None) -> None:
    """Record this process's uncaught exception in ``path`` (None: nothing to do), then let
    the previous hook print it as usual. Once per process."""
    global _installed
    if path is None or _installed == path:
        return
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException,
             tb: TracebackType | None) -> None:
        if not issubclass(exc_type, KeyboardInterrupt | SystemExit):
            try:
                record(path, exc_type, exc, tb)
            except OSError:
                pass  # the traceback still reaches the log below
        previous(exc_type, exc, tb)

    sys.excepthook = hook
    _installed = path
