"""A distributed partition as a job: mpiexec started on this machine by its agent, under a
manifest, so ``dglctl status`` lists it, ``dglctl logs`` prints its output and ``dglctl stop``
ends it (and so every rank: mpiexec ends its ranks on every host) as they do a training job.

mpiexec runs here, as ``mpirun`` runs on a login node: it starts the other hosts' daemons over
SSH (``jobs/mpi.py``). The job has one host (this machine, through the local transport, its
workspace under ``DGLCTL_HOME``) and one process, ``mpiexec`` (role ``partition``). It runs
without a lease: a launcher killed outright leaves the partition running, and ``dglctl stop``
ends it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..config import ClusterConfig, Host, SSHSettings
from ..hosts.agent_client import AgentClient, ProcStatus
from ..hosts.transports import make_transport
from .manifest import HostRecord, JobManifest, JobState, ProcRecord, dglctl_home, new_job_id
from .observe import LogStream, probe_job
from .stop import stop_job

PROC = "mpiexec"
ROLE = "partition"
POLL_SECONDS = 0.2


def this_machine(timeout: float) -> ClusterConfig:
    """A one-host local cluster of this machine (the job's host), its workspace in
    ``DGLCTL_HOME``."""
    host = Host(address="127.0.0.1", name=socket.gethostname() or "localhost",
                data_address="127.0.0.1", ssh=SSHSettings(), python=sys.executable,
                workspace=str(dglctl_home() / "partitions"))
    return ClusterConfig(path=str(dglctl_home() / "partitions"), hosts=(host,),
                         transport="local", timeout=timeout)


class MpiJob:
    """mpiexec as job ``job_id``: started, followed line by line, stopped."""

    def __init__(self, argv: Sequence[str], *, script: str, args: Sequence[str],
                 part_config: Path, timeout: float) -> None:
        self.argv = list(argv)
        self.cluster = this_machine(timeout)
        self.timeout = timeout
        self.job_id = new_job_id()
        transport = make_transport(self.cluster.hosts[0], self.cluster)
        self.client = AgentClient(transport)
        host = self.cluster.hosts[0]
        self.manifest = JobManifest(
            job_id=self.job_id, token=secrets.token_hex(16), cluster=self.cluster.source(),
            cluster_record=self.cluster.record(), script=script, args=list(args),
            part_config=str(part_config), ip_config="",
            hosts=[HostRecord(host.name, host.address, host.data_address,
                              transport.workspace)],
            timeout=timeout, launcher={"pid": os.getpid(), "host": socket.gethostname()})
        self.logs: LogStream | None = None

    def start(self) -> None:
        """Record the job, then start mpiexec under the agent (its own process group)."""
        self.manifest.save()
        t = self.client.transport
        # mpiexec gets this process's environment (PATH, PYTHONPATH, OMPI_* settings).
        t.put_bytes(json.dumps(dict(os.environ)).encode(),
                    f"jobs/{self.job_id}/{PROC}.env.json", mode=0o600)
        started = self.client.start(self.job_id, PROC, os.getcwd(), self.argv)
        rec = ProcRecord(PROC, 0, ROLE, 0, started.pgid, started.log)
        self.manifest.procs.append(rec)
        self.manifest.state = JobState.RUNNING
        self.manifest.save()
        self.logs = LogStream([self.client], self.job_id, [rec])

    def follow(self, on_line: Callable[[str], None]) -> tuple[int, bool]:
        """Give every line of mpiexec's output to ``on_line`` until it ends; return its exit
        code and whether ``dglctl stop`` ended it."""
        assert self.logs is not None, "start() first"
        while True:
            lines, _ = self.logs.read()
            for line in lines:
                on_line(line.text)
            (state,) = probe_job([self.client], self.manifest).values()
            if state.state is not ProcStatus.RUNNING:
                # All it wrote is in its log now: read to the end (its last words came after
                # the read above), then its unfinished last line.
                while True:
                    lines, read = self.logs.read()
                    for line in lines:
                        on_line(line.text)
                    if not read:
                        break
                for line in self.logs.flush():
                    on_line(line.text)
                stopped = JobManifest.load(self.job_id).state in (JobState.STOPPING,
                                                                   JobState.STOPPED)
                code = state.code if state.code is not None else 128 + (state.signal or 0)
                return code, stopped
            if not lines:
                time.sleep(POLL_SECONDS)

    def stop(self) -> None:
        """End mpiexec (TERM to its group, KILL after the job's timeout): its ranks end."""
        stop_job(self.manifest, [self.client], grace=self.timeout)

    def record_end(self, state: JobState, cause: str | None, *,
                   over_stop: bool = False) -> None:
        """Record how the job ended (what ``dglctl status`` shows); a stop already recorded
        stays, unless ``over_stop`` (the job had finished when the stop came)."""
        def ended(m: JobManifest) -> None:
            if over_stop or m.state not in (JobState.STOPPING, JobState.STOPPED):
                m.state = state
            m.ended = time.time()
            if cause:
                m.result = {"cause": cause}

        self.manifest.update(ended)

    def close(self) -> None:
        """Close the connection to the agent."""
        self.client.transport.close()
