"""The agent's ``preflight``: what a host has before a launch (Python and dglctl versions,
busy ports on the data address, free disk, a writable workspace, CPUs, the interfaces and
their addresses, for ``hosts/netif.py`` to name the one that carries the data address, and,
when asked, its GPUs, and whether mpi4py and the ParMETIS library load)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from .ports import reserved
from .protocol import JOBS_DIR, SSH_ARRIVAL, PreflightReport
from .workspace import private_dir

SIOCGIFADDR = 0x8915  # <linux/sockios.h>: an interface's (primary) IPv4 address


def interfaces() -> dict[str, str]:
    """``{IPv4 address: interface name}`` for the interfaces that have one; {} when unknown."""
    try:
        import fcntl
    except ImportError:  # not a Unix
        return {}
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):  # down or without an IPv4 address
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
                found[socket.inet_ntoa(raw[20:24])] = name
    return found


GPU_LIST_TIMEOUT = 30.0  # nvidia-smi can take seconds to wake a driver in persistence-off mode


def gpus() -> tuple[tuple[str, ...], str | None]:
    """``(GPU lines of nvidia-smi -L, why they could not be listed)``: what CUDA numbers
    0, 1, ... on this host (before CUDA_VISIBLE_DEVICES). Asking nvidia-smi, not torch,
    keeps the preflight fast and needs no CUDA build of torch to tell what the host has."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (), "nvidia-smi is not on its PATH (no NVIDIA driver installed?)"
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True,
                             timeout=GPU_LIST_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return (), f"'nvidia-smi -L' failed: {e}"
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        return (), f"'nvidia-smi -L' failed: {said[0] if said else f'exit {out.returncode}'}"
    return tuple(line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")), None


MPI_CHECK_TIMEOUT = 60.0
# Run in a child: importing mpi4py's MPI initialises MPI, which the agent must not do itself.
_MPI_CHECK = """
import json
import mpi4py
from mpi4py import MPI
found = {"mpi": f"mpi4py {mpi4py.__version__}, "
                f"{MPI.Get_library_version().splitlines()[0].split(',')[0].strip()}"}
try:
    from partitioner.methods.parmetis import load_library
    lib = load_library()
    found["mpi"] += f"; ParMETIS: {lib.flavour} ({lib.idx_bits}-bit ids)"
except Exception as e:
    found["parmetis_error"] = str(e)
print(json.dumps(found))
"""


def mpi() -> tuple[str | None, str | None, str | None]:
    """``(what loads, why mpi4py does not, why the ParMETIS library does not)``: mpi4py with
    its MPI library and the ParMETIS library, as a rank of ``python -m
    partitioner.distributed`` would load them (this Python)."""
    try:
        out = subprocess.run([sys.executable, "-c", _MPI_CHECK], capture_output=True, text=True,
                             timeout=MPI_CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"checking mpi4py failed: {e}", None
    if out.returncode != 0:
        lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
        return None, lines[-1] if lines else f"exit {out.returncode}", None
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return found["mpi"], None, found.get("parmetis_error")


def arrival_address() -> tuple[str, str | None]:
    """The address this host was reached at, the one the cluster's network knows it by, and
    why there is none: over SSH, sshd's ``SSH_CONNECTION`` ("client-ip client-port server-ip
    server-port"); in a Slurm job step, the node's ``NodeAddr`` (``scontrol show node``)
    resolved here, where the cluster's names resolve."""
    words = os.environ.get("SSH_CONNECTION", "").split()
    if len(words) == 4:
        return words[2], None
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        return "", "not reached over SSH (no SSH_CONNECTION): its address is not known"
    try:
        out = subprocess.run(["scontrol", "--oneliner", "show", "node", node],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", f"Slurm node {node}: scontrol failed ({e})"
    fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
    addr = fields.get("NodeAddr") or node
    try:
        return socket.gethostbyname(addr), None
    except OSError:
        return "", f"Slurm node {node}: its NodeAddr {addr!r} does not resolve on the node"


def cmd_preflight(args: argparse.Namespace) -> dict[str, Any]:
    """Python and dglctl versions, busy ports on the bind address, free disk, writable workspace."""
    from dglctl import __version__

    ws = Path(os.path.expanduser(args.workspace))
    writable = True
    try:
        ws.mkdir(parents=True, exist_ok=True)
        # Private before the launcher copies anything there (the env files hold the token).
        private_dir(ws / JOBS_DIR)
        probe = ws / f".write-test-{os.getpid()}"
        probe.write_text("x")
        probe.unlink()
    except OSError:
        writable = False
    busy, bind_error, bind = [], None, args.bind
    if bind == SSH_ARRIVAL:
        bind, bind_error = arrival_address()
    if bind_error is None:
        with socket.socket() as s:
            try:
                s.bind((bind, 0))
            except OSError as e:  # not an address of this host: no port of it is worth probing
                bind_error = e.strerror or str(e)
    ports = [int(p) for p in args.ports.split(",") if p] if bind_error is None else []
    for port in ports:
        with socket.socket() as s:
            # As ZeroMQ does: a port held only by TIME_WAIT leftovers is free to listen on.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((bind, port))
            except OSError:
                busy.append(port)
    # Ports another launch has chosen and reserved, whose servers may not listen yet.
    busy += sorted(reserved(ports, but=args.job) - set(busy))
    free = shutil.disk_usage(ws if ws.exists() else ws.parent).free if writable else 0
    found, gpu_error = gpus() if args.gpus else (None, None)
    mpi_found, mpi_error, parmetis_error = mpi() if args.mpi else (None, None, None)
    return PreflightReport(
        python=sys.version.split()[0], executable=sys.executable, dglctl=__version__,
        ports_busy=frozenset(busy), bind_address=bind, bind_error=bind_error, disk_free=free,
        workspace=str(ws), workspace_writable=writable, hostname=socket.gethostname(),
        cpus=len(os.sched_getaffinity(0)), interfaces=interfaces(), gpus=found,
        gpu_error=gpu_error, mpi=mpi_found, mpi_error=mpi_error,
        parmetis_error=parmetis_error).to_json()
