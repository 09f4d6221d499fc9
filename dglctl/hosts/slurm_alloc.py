"""The Slurm allocation dglctl runs in: its nodes (``scontrol show hostnames``), each node's
``NodeAddr`` (the data address its servers bind), the tasks and GPUs per node it was given;
and the cluster a launch builds from it (``transport: slurm``).

Only ``SLURM_*`` variables and ``scontrol`` are read: both are there in every shell of an
allocation (``salloc``, an ``sbatch`` script, ``srun --pty bash``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..config import FROM_HOST, ClusterConfig, Host, SSHSettings, check_loopback, resolve_ip
from ..errors import DglctlError

HOW_TO_ALLOCATE = ("run it inside an allocation: 'salloc -N2' then the same command, or "
                   "'dglctl slurm-script ... > job.sh; sbatch job.sh'")


class SlurmError(DglctlError):
    """No allocation to run in, or Slurm's own tools failed (names the command and what it
    printed)."""


@dataclass(frozen=True)
class Allocation:
    """The nodes of one Slurm job and what it granted each."""

    job_id: str
    nodes: tuple[str, ...]
    addresses: Mapping[str, str]  # node name -> its NodeAddr, as slurm.conf gives it
    tasks_per_node: int | None  # SLURM_NTASKS_PER_NODE (--ntasks-per-node), if given
    gpus_per_node: int | None  # SLURM_GPUS_ON_NODE, if the job has GPUs


def scontrol(*args: str, timeout: float = 60.0) -> str:
    """``scontrol ARGS``'s output; SlurmError naming the command when it fails."""
    exe = shutil.which("scontrol")
    if exe is None:
        raise SlurmError("scontrol is not on PATH: this machine has no Slurm client",
                         hint="run dglctl on a node of the cluster (or its login node)")
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"'scontrol {' '.join(args)}' took longer than {timeout:.0f}s",
                         hint="is slurmctld up? ('scontrol ping')") from None
    if p.returncode != 0:
        raise SlurmError(f"'scontrol {' '.join(args)}' exited with {p.returncode}: "
                         f"{(p.stderr or p.stdout).strip()[-500:]}",
                         hint="is slurmctld up? ('scontrol ping')")
    return p.stdout


def _count(environ: Mapping[str, str], name: str) -> int | None:
    """An integer ``SLURM_*`` count; Slurm writes repeated ones as ``2(x3)``: the first."""
    value = environ.get(name, "").strip()
    m = re.match(r"(\d+)", value)
    return int(m[1]) if m else None


def current_allocation(environ: Mapping[str, str] | None = None) -> Allocation:
    """The allocation this process runs in, from its ``SLURM_*`` variables and scontrol;
    SlurmError outside one, with how to get one."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise SlurmError("--slurm: this shell is not inside a Slurm allocation "
                         "(SLURM_JOB_ID and SLURM_JOB_NODELIST are not set)",
                         hint=HOW_TO_ALLOCATE)
    nodes = tuple(scontrol("show", "hostnames", nodelist).split())
    if not nodes:
        raise SlurmError(f"Slurm job {job}: its node list {nodelist!r} names no node")
    return Allocation(job_id=job, nodes=nodes, addresses=node_addresses(nodes),
                      tasks_per_node=_count(env, "SLURM_NTASKS_PER_NODE"),
                      gpus_per_node=_count(env, "SLURM_GPUS_ON_NODE"))


def node_addresses(nodes: tuple[str, ...]) -> dict[str, str]:
    """Each node's ``NodeAddr`` (its name where slurm.conf gives none), one scontrol call."""
    out = scontrol("--oneliner", "show", "node", ",".join(nodes))
    found: dict[str, str] = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "NodeName" in fields:
            found[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    missing = [n for n in nodes if n not in found]
    if missing:
        raise SlurmError(f"scontrol show node did not describe {', '.join(missing)}")
    return found


def cluster_from_allocation(alloc: Allocation, base: ClusterConfig | None) -> ClusterConfig:
    """The cluster of ``alloc``'s nodes, in their order (node i serves partition i): the
    Slurm transport, each node's NodeAddr as its data address; the other settings from
    ``base`` (a cluster YAML with ``transport: slurm``), else the defaults. Trainers per node
    follow ``--ntasks-per-node`` and GPUs ``SLURM_GPUS_ON_NODE``, unless the YAML sets them."""
    where = base.path if base is not None else f"Slurm job {alloc.job_id}"
    template = base if base is not None else ClusterConfig(path=where, hosts=(),
                                                           trainers_given=False)
    # The launcher's own interpreter unless the YAML names one: inside an allocation the
    # nodes share its file system (and srun passes PATH on to them).
    python = template.python or sys.executable
    hosts = []
    for node in alloc.nodes:
        address = alloc.addresses[node]
        # A NodeAddr only the nodes resolve (the cluster's own DNS): the node's agent
        # resolves it at preflight, as a compute node behind a login node over SSH.
        ip = resolve_ip(address) or FROM_HOST
        hosts.append(Host(address=node, name=node, data_address=ip, ssh=SSHSettings(),
                          python=python, workspace=template.workspace))
    check_loopback(where, hosts)
    cluster = replace(template, hosts=tuple(hosts), transport="slurm", slurm_job=alloc.job_id)
    counts: dict[str, int] = {}
    if alloc.gpus_per_node and not template.gpus_per_host:
        counts["gpus_per_host"] = alloc.gpus_per_node
    if alloc.tasks_per_node and not (base is not None and base.trainers_given):
        counts["trainers_per_host"] = alloc.tasks_per_node
    return cluster.with_overrides(**counts) if counts else cluster


# How ``scontrol show job`` names the ends of a job, in words.
_END_STATES = {"CANCELLED": "was cancelled (scancel)", "TIMEOUT": "reached its time limit",
               "NODE_FAIL": "lost a node (NODE_FAIL)", "PREEMPTED": "was preempted",
               "DEADLINE": "passed its deadline", "OUT_OF_MEMORY": "ran out of memory",
               "BOOT_FAIL": "failed to boot its nodes", "COMPLETED": "has completed",
               "FAILED": "has failed"}


def job_end(job: str, settle: float = 10.0) -> str:
    """How Slurm job ``job`` ended, in words (``was cancelled (scancel)``, ``reached its time
    limit``, ...), from ``scontrol show job`` (waiting up to ``settle`` s while it completes);
    ``has ended`` once Slurm no longer lists it."""
    deadline = time.monotonic() + settle
    while True:
        try:
            out = scontrol("--oneliner", "show", "job", job, timeout=15)
        except SlurmError:
            return "has ended"
        state = re.search(r"JobState=(\S+)", out)
        if state is None:
            return "has ended"
        # A job is COMPLETING while its steps are ended; its end state comes after.
        if state[1] not in ("COMPLETING", "RUNNING") or time.monotonic() > deadline:
            return _END_STATES.get(state[1], f"has ended ({state[1]})")
        time.sleep(0.2)
