"""One long-lived agent per host for a job's life (``python -m dglctl.agent serve``): the
launcher's frequent calls (probe, logs, lease renewals, starts) become a line each way on an
open stdin/stdout, instead of an interpreter started per call per host (over SSH, a channel
and a Python start each time). A broken session is closed, and its call made the old way."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..errors import RemoteCommandFailed
from .transport import AGENT, Stream, Transport

# DGLCTL_AGENT_SESSIONS=0: every call starts its own agent, as before sessions (benchmarks
# measure both in one run).
ENABLED = os.environ.get("DGLCTL_AGENT_SESSIONS", "1") != "0"


class SessionBroken(Exception):
    """The session's process ended or stopped answering; the call was not answered."""


class AgentSession:
    """An ``agent serve`` process on one host; ``call`` is safe from several threads."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        # A session whose host ends what it started with it (a Slurm step) cleans up the
        # jobs' shared memory when the host ends it (scancel, time limit).
        step = ["--ends-with-step"] if transport.processes_need_session else []
        self._stream: Stream | None = transport.open_stream(
            [transport.python(), *AGENT, "serve", *step])
        self._buf = b""
        self._lock = threading.Lock()

    def call(self, args: Sequence[str], timeout: float) -> Any:
        """One agent command's JSON result; RemoteCommandFailed when the agent reports an
        error, SessionBroken when the session cannot answer (it is then closed)."""
        with self._lock:
            if self._stream is None:
                raise SessionBroken("closed")
            try:
                self._stream.send(json.dumps(list(args)).encode() + b"\n")
                line = self._read_line(timeout)
            except (OSError, EOFError, SessionBroken) as e:
                self._close_locked()
                raise SessionBroken(str(e)) from None
        reply = json.loads(line)
        if not reply.get("ok"):
            # As a spawned agent's failure reads: the command and the last lines it left.
            tail = "\n".join(str(reply.get("traceback") or reply.get("error")).strip()
                             .splitlines()[-8:])
            raise RemoteCommandFailed(f"host {self.transport.host.name}: agent '{args[0]}' "
                                      f"failed:\n{tail}")
        return reply["result"]

    def _read_line(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        assert self._stream is not None  # call() checked it, under the lock
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionBroken(f"no answer within {timeout:.0f}s")
            chunk = self._stream.recv(left)
            if chunk == b"":
                raise EOFError("the agent session ended")
            if chunk:
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _close_locked(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - closing a broken stream must not fail a call
                pass

    def close(self) -> None:
        """End the session (the agent exits when its stdin closes)."""
        with self._lock:
            self._close_locked()
