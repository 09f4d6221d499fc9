"""The host agent's command line (``python -m dglctl.agent CMD ...``): one sub-command per
agent action; ``serve`` answers the same commands, one JSON line each, over stdin/stdout."""

from __future__ import annotations

import argparse

SSH_ARRIVAL = "@ssh"  # preflight --bind: the address the host's SSH connection arrived at
# A copy in flight over SSH: its private folder beside the destination (hosts.transport),
# which prune leaves alone (on a shared workspace, another host's copy may be under way).
COPY_TEMP_PREFIX = ".dglctl-tmp"


def parser() -> argparse.ArgumentParser:
    """The agent's argument parser."""
    p = argparse.ArgumentParser(prog="python -m dglctl.agent")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("preflight")
    s.add_argument("--workspace", required=True)
    s.add_argument("--bind", default="127.0.0.1", help=f"the data address, or {SSH_ARRIVAL}: "
                   "the address this host's SSH connection arrived at")
    s.add_argument("--ports", default="")
    s = sub.add_parser("checksums")
    s.add_argument("--root", required=True)
    s.add_argument("--files", required=True)
    s.add_argument("--sizes-only", action="store_true")
    s = sub.add_parser("prune")
    s.add_argument("--root", required=True)
    s.add_argument("--keep", required=True, help="JSON list of the paths to keep")
    s = sub.add_parser("start")
    for a in ("--workspace", "--job", "--name", "--cwd", "--argv"):
        s.add_argument(a, required=True)
    s.add_argument("--lease", type=float, default=None,
                   help="end the process when the job's lease is silent this many seconds")
    s.add_argument("--grace", type=float, default=10.0)
    s = sub.add_parser("wrap")
    s.add_argument("--rc", required=True)
    s.add_argument("--pidfile", required=True)
    s.add_argument("--lease", default=None, help="the lease file to watch")
    s.add_argument("--lease-seconds", type=float, default=30.0)
    s.add_argument("--grace", type=float, default=10.0)
    s.add_argument("--job", default="")
    s.add_argument("--shm-dir", default="")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("renew")
    for a in ("--workspace", "--job"):
        s.add_argument(a, required=True)
    s = sub.add_parser("listening")
    s.add_argument("--address", required=True)
    s.add_argument("--ports", required=True, help="comma-separated")
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
        if name == "logs":
            s.add_argument("--tail", type=int, default=None, help="start at the last N lines")
            s.add_argument("--since", type=float, default=None,
                           help="start at the lines written since this Unix time")
            s.add_argument("--since-ago", type=float, default=None,
                           help="start at the lines written this many seconds ago")
    sub.add_parser("serve", help="answer commands given as JSON lines on stdin, until EOF")
    return p
