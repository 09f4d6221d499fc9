"""The agent as one long-lived process per host for a job's life (``agent serve``): the
launcher writes one command per line (a JSON list of its argv words) and reads one JSON line
back, ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``. Polling a host then
costs a line each way instead of an interpreter's start. It exits when its stdin closes: a
launcher that dies (or its SSH connection) takes it along."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

from .protocol import NOT_SERVED


def answer(line: bytes, run: Callable[[argparse.Namespace], Any],
           parser: Callable[[], argparse.ArgumentParser]) -> dict[str, Any]:
    """The reply to one request line: ``parser()``'s command, run by ``run``."""
    try:
        argv = json.loads(line)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError("a request is a JSON list of strings")
        args = parser().parse_args(argv)
        if args.cmd in NOT_SERVED:
            raise ValueError(f"'{args.cmd}' is not served")
        return {"ok": True, "result": run(args)}
    except SystemExit:  # argparse's usage error: it printed the reason to stderr
        return {"ok": False, "error": f"bad agent command: {line[:200]!r}"}
    except Exception as e:  # noqa: BLE001 - reported to the launcher, as a non-zero exit would be
        return {"ok": False, "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()[-4000:]}


def serve(run: Callable[[argparse.Namespace], Any],
          parser: Callable[[], argparse.ArgumentParser]) -> int:
    """Answer requests from stdin until it closes (commands as ``parser()`` reads them)."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        out.write(json.dumps(answer(line, run, parser)).encode() + b"\n")
        out.flush()
    return 0
