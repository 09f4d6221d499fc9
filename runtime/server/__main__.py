"""``python -m runtime.server``: run one graph server from the env contract and options."""

from __future__ import annotations

import argparse
import logging
import sys

from ..env import RuntimeEnv
from ..errors import DistError
from .graph_server import exit_server_process, run_server

# Options that override a field of the env contract (DGLCTL_<FIELD>).
_OVERRIDES = ("ip_config", "part_config", "machine_id", "server_id", "num_servers", "job_id",
              "timeout", "shm_dir", "log_level")


def parse_args(argv: list[str] | None, environ: dict[str, str] | None = None) -> RuntimeEnv:
    """The server's contract: ``environ`` (default: this process's) with options applied
    (the role defaults to "server")."""
    p = argparse.ArgumentParser(
        prog="python -m runtime.server",
        description="Run one graph server. Values come from the DGLCTL_* environment (what "
                    "'dglctl launch' sets); options override them. The job token is read from "
                    "DGLCTL_TOKEN or --token-file, never from the command line (ps shows it).")
    p.add_argument("--ip-config")
    p.add_argument("--part-config")
    p.add_argument("--machine-id", type=int)
    p.add_argument("--server-id", type=int)
    p.add_argument("--num-servers", type=int)
    p.add_argument("--job-id")
    p.add_argument("--token-file")
    p.add_argument("--timeout", type=float)
    p.add_argument("--shm-dir")
    p.add_argument("--log-level")
    args = p.parse_args(argv)
    values: dict[str, str] = {}
    for key in _OVERRIDES:
        value = getattr(args, key)
        if value is not None:
            values[f"DGLCTL_{key.upper()}"] = str(value)
    if args.token_file:
        with open(args.token_file) as f:
            values["DGLCTL_TOKEN"] = f.read().strip()
    env = RuntimeEnv.from_environ(environ, values)
    if env is None:  # no role set: a server started by hand
        env = RuntimeEnv.from_environ(environ, {**values, "DGLCTL_ROLE": "server"})
    assert env is not None
    return env


def main(argv: list[str] | None = None) -> int:
    """Run one server; a DistError or OSError is one line on stderr and exit status 1."""
    try:
        env = parse_args(argv)
        logging.basicConfig(level=env.log_level.upper(),
                            format="%(asctime)s %(name)s %(message)s")
        if env.role != "server":
            raise DistError(f"DGLCTL_ROLE is {env.role!r}; this entry point runs servers")
        run_server(env)
        exit_server_process(0)
    except DistError as e:
        print(f"runtime.server: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"runtime.server: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
