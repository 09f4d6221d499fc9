"""The host agent: what dglctl runs on each host (``python -m dglctl.agent CMD``), local or SSH.

Every launcher action on a host is one agent command that prints JSON (``protocol.py`` holds
the replies, shared with ``hosts/agent_client.py``): preflight checks (``preflight.py``),
file checksums and prune (``files.py``), starting, probing and stopping the job's processes
(``processes.py``, under the wrapper and the lease: ``lease.py``, ``proc_groups.py``),
reading new log lines (``logs.py``). ``serve`` answers the same commands as JSON lines for a
job's life (``serve.py``). One code path serves the local transport and SSH.

What the agent imports: the standard library, its own modules, dglctl's version, and two
leaves of the other packages that name what it handles on the host: ``partitioner.format``'s
file checksum and ``runtime.store.shm``'s names of a job's shared memory
(``tests/test_layers.py`` checks it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from .files import cmd_checksums, cmd_prune
from .logs import cmd_logs, cmd_tail
from .ports import cmd_release, cmd_reserve
from .preflight import cmd_preflight
from .processes import cmd_listening, cmd_probe, cmd_renew, cmd_start, cmd_stop, cmd_wrap
from .protocol import AGENT_MODULE, GRACE_SECONDS, SSH_ARRIVAL

# Each command the agent answers with JSON (``wrap`` and ``serve`` run instead: see main).
COMMANDS: dict[str, Callable[[argparse.Namespace], Any]] = {
    "preflight": cmd_preflight, "checksums": cmd_checksums, "prune": cmd_prune,
    "start": cmd_start, "listening": cmd_listening, "renew": cmd_renew, "probe": cmd_probe,
    "stop": cmd_stop, "logs": cmd_logs, "tail": cmd_tail, "reserve": cmd_reserve,
    "release": cmd_release,
}


def parser() -> argparse.ArgumentParser:
    """The agent's argument parser."""
    p = argparse.ArgumentParser(prog=f"python -m {AGENT_MODULE}")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("preflight")
    s.add_argument("--workspace", required=True)
    s.add_argument("--bind", default="127.0.0.1", help=f"the data address, or {SSH_ARRIVAL}: "
                   "the address this host's SSH connection arrived at")
    s.add_argument("--ports", default="")
    s.add_argument("--job", default=None,
                   help="the job asking: its own port reservations do not count as busy")
    s.add_argument("--gpus", action="store_true", help="also list the host's GPUs")
    s.add_argument("--mpi", action="store_true",
                   help="also check mpi4py and the ParMETIS library (a distributed partition)")
    s = sub.add_parser("checksums")
    s.add_argument("--root", required=True)
    s.add_argument("--files", required=True)
    s.add_argument("--sizes-only", action="store_true")
    s = sub.add_parser("prune")
    s.add_argument("--root", required=True)
    s.add_argument("--keep", required=True, help="JSON list of the paths shipped now")
    s.add_argument("--record", required=True,
                   help="the file listing what the last launch shipped (rewritten: --keep)")
    s = sub.add_parser("start")
    for a in ("--workspace", "--job", "--name", "--cwd", "--argv"):
        s.add_argument(a, required=True)
    s.add_argument("--lease", type=float, default=None,
                   help="end the process when the job's lease is silent this many seconds")
    s.add_argument("--grace", type=float, default=GRACE_SECONDS)
    s = sub.add_parser("wrap")
    s.add_argument("--rc", required=True)
    s.add_argument("--pidfile", required=True)
    s.add_argument("--lease", default=None, help="the lease file to watch")
    s.add_argument("--lease-seconds", type=float, default=30.0)
    s.add_argument("--grace", type=float, default=GRACE_SECONDS)
    s.add_argument("--job", default="")
    s.add_argument("--shm-dir", default="")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("renew")
    for a in ("--workspace", "--job"):
        s.add_argument(a, required=True)
    s = sub.add_parser("reserve", help="reserve ports for a job until its lease lapses")
    for a in ("--workspace", "--job", "--ports"):
        s.add_argument(a, required=True)
    s.add_argument("--lease-seconds", type=float, required=True)
    s = sub.add_parser("release", help="remove a job's port reservations")
    s.add_argument("--job", required=True)
    s = sub.add_parser("listening")
    s.add_argument("--address", required=True)
    s.add_argument("--ports", required=True, help="comma-separated")
    for name in ("probe", "stop"):
        s = sub.add_parser(name)
        for a in ("--workspace", "--job", "--procs"):
            s.add_argument(a, required=True)
        s.add_argument("--grace", type=float, default=GRACE_SECONDS)
        if name == "stop":
            s.add_argument("--shm-dir", default=None,
                           help="the job's shared-memory folder [default: /dev/shm]")
            s.add_argument("--keep-shm", action="store_true",
                           help="leave the job's shared memory (its servers still run: only "
                                "trainers are stopped, to be started again)")
            s.add_argument("--shm-machine", type=int, action="append", default=None,
                           help="remove only this machine's shared memory (its servers are "
                                "stopped to be started again); repeatable")
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
    s = sub.add_parser("serve", help="answer commands given as JSON lines on stdin, until EOF")
    s.add_argument("--ends-with-step", action="store_true",
                   help="the host ends what this session started when the session ends (a "
                        "Slurm job step): at the end of input or on SIGTERM (scancel, time "
                        "limit), end those processes, then remove their jobs' shared memory")
    return p


def run(args: argparse.Namespace) -> Any:
    """Run one parsed agent command (not ``wrap`` or ``serve``) and return its JSON result."""
    return COMMANDS[args.cmd](args)


def main(argv: list[str] | None = None) -> int:
    """Parse one agent command, run it, print its JSON result (``wrap`` returns the code;
    ``serve`` answers commands from stdin until it closes)."""
    args = parser().parse_args(argv)
    if args.cmd == "wrap":
        if args.argv and args.argv[0] == "--":
            args.argv = args.argv[1:]
        return cmd_wrap(args)
    if args.cmd == "serve":
        from .serve import serve

        if not args.ends_with_step:
            return serve(run, parser)
        from .processes import end_started, end_with_step

        # The step ends with this process, and Slurm then ends what it started; first this
        # agent ends them itself and removes their shared memory (a launcher that closed
        # the session after its teardown left nothing to do; one killed outright did).
        end_with_step()
        try:
            return serve(run, parser)
        finally:
            end_started()
    sys.stdout.write(json.dumps(run(args)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
