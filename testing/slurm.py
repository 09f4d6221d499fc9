"""A real Slurm on this machine for tests: munge, one slurmctld and two slurmd (``n1`` at
127.0.0.1, ``n2`` at 127.0.0.2, each on its own port), so that the processes of the two nodes
bind different addresses, as two machines' would. Its own config, state and logs in a
temporary folder; every daemon is stopped (and every job cancelled) at the end.

Processes are tracked by cgroup (proctrack/cgroup, the v1 freezer here) where this machine
lets root make cgroups, as on real clusters: whatever a job step started ends with the step.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from testing.ports import free_port_range
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until

NODES = {"n1": "127.0.0.1", "n2": "127.0.0.2"}
FREEZER = Path("/sys/fs/cgroup/freezer")


@dataclass
class TestSlurm:
    """The running test cluster: ``env`` (SLURM_CONF) for every Slurm command and dglctl."""

    root: Path
    conf: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    proctrack: str = "proctrack/linuxproc"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *argv: str, timeout: float = 6 * TIMEOUT, **kw) -> subprocess.CompletedProcess:
        """A Slurm command (or anything) with this cluster's env, output as text."""
        return subprocess.run(list(argv), env={**self.env, **kw.pop("env", {})},
                              capture_output=True, text=True, timeout=timeout, **kw)

    def jobs(self) -> list[str]:
        """The ids of the jobs Slurm still has pending or running."""
        r = self.run("squeue", "-h", "-o", "%i")
        return r.stdout.split()

    def steps(self) -> list[str]:
        """The job steps Slurm still runs (``JOB.STEP``)."""
        r = self.run("squeue", "-h", "-s", "-o", "%i")
        return r.stdout.split()

    def settled(self, timeout: float = 6 * TIMEOUT) -> tuple[list[str], list[str]]:
        """The jobs and steps Slurm still has once none is left, or after ``timeout``
        (a cancelled job is listed while it completes: its steps' processes are ended)."""
        with contextlib.suppress(WaitTimeout):  # the caller names what is left
            wait_until(lambda: (self.jobs(), self.steps()) == ([], []),
                       "no Slurm job or step left", timeout=timeout, interval=0.2)
        return self.jobs(), self.steps()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", *self.jobs(), timeout=2 * TIMEOUT)
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(2 * TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(TIMEOUT)


def _program(*names: str) -> str:
    """The first of ``names`` on PATH or in /usr/sbin: Debian's plain build (``-wlm``) before
    the alternatives' link, which the emulator package may have taken."""
    for name in names:
        for folder in (None, "/usr/sbin"):
            found = shutil.which(name, path=folder)
            if found:
                return found
    raise RuntimeError(f"{' or '.join(names)} missing: run tests/setup_slurm.sh")


def ensure_munge() -> None:
    """munged running (started as the munge user when it is not): Slurm signs with it."""
    ok = subprocess.run("munge -n | unmunge", shell=True, capture_output=True)
    if ok.returncode == 0:
        return
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", _program("munged")], check=True,
                   timeout=TIMEOUT)
    wait_until(lambda: subprocess.run("munge -n | unmunge", shell=True,
                                      capture_output=True).returncode == 0,
               "munged answering (see /var/log/munge/munged.log)", timeout=3 * TIMEOUT,
               interval=0.2)


def _cgroup_ok() -> bool:
    probe = FREEZER / f"dglctl-test-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def start_slurm(root: Path) -> TestSlurm:
    """Write the config under ``root``, start the daemons, wait until both nodes are idle."""
    ensure_munge()
    # Below the ephemeral range and in this xdist worker's share (see testing.ports), on
    # the wildcard address the daemons listen on.
    base = free_port_range(["0.0.0.0"], 2 + len(NODES))
    ctld_port, slurmd_port, *node_ports = range(base, base + 2 + len(NODES))
    for d in ("state", "log", *(f"spool/{n}" for n in NODES)):
        (root / d).mkdir(parents=True, exist_ok=True)
    proctrack = "proctrack/cgroup" if _cgroup_ok() else "proctrack/linuxproc"
    host = socket.gethostname()
    lines = [
        # Job ids of their own: two test clusters at once (two test runs) never share a
        # job's cgroup (slurm/uid_0/job_N under the freezer). From the system's entropy, as
        # a test that seeds ``random`` would make two runners draw the same id.
        "ClusterName=dglctltest",
        f"FirstJobId={random.SystemRandom().randrange(1000, 10**6, 1000)}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd-%n.log",
        f"ProctrackType={proctrack}", "TaskPlugin=task/none", "KillWait=5",
        # sbatch --wait polls the job after 2 s, then 8 s later, then every 32 s while the
        # interval is below MinJobAge/2 (300 s by default): a job of 12 s was seen ending
        # at 42 s. At 16 it polls every 8 s; a finished job's record stays at least 16 s,
        # enough for the scontrol show job right after sbatch returns.
        "MinJobAge=16",
        "MpiDefault=none", "SwitchType=switch/none", "ReturnToService=2",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill", "MailProg=/bin/true",
        *(f"NodeName={n} NodeAddr={a} NodeHostname={host} Port={p} CPUs={os.cpu_count()} "
          "State=UNKNOWN" for (n, a), p in zip(NODES.items(), node_ports, strict=True)),
        f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=YES",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    (root / "cgroup.conf").write_text(
        "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\n"
        "ConstrainRAMSpace=no\n")
    cluster = TestSlurm(root=root, conf=conf, proctrack=proctrack)
    log = open(root / "log" / "daemons.out", "ab")  # noqa: SIM115 - the daemons' until stop
    try:
        cluster.procs.append(subprocess.Popen(
            [_program("slurmctld-wlm", "slurmctld"), "-D", "-f", str(conf)],
            env=cluster.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL))
        stepd = _program("slurmstepd-wlm", "slurmstepd")
        for n in NODES:
            cluster.procs.append(subprocess.Popen(
                [_program("slurmd-wlm", "slurmd"), "-D", "-f", str(conf), "-N", n,
                 "-d", stepd], env=cluster.env, stdout=log, stderr=log,
                stdin=subprocess.DEVNULL))
        def idle() -> dict[str, str] | None:
            r = cluster.run("sinfo", "-h", "-N", "-o", "%N %t")
            states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
            if all(states.get(n) == "idle" for n in NODES):
                return states
            dead = [p.args[0] for p in cluster.procs if p.poll() is not None]
            assert not dead, f"the test Slurm's {dead} ended (nodes {states}); see {root}/log"
            return None

        wait_until(idle, f"the test Slurm's nodes idle (see {root}/log)",
                   timeout=6 * TIMEOUT, interval=0.2)
        return cluster
    except BaseException:
        cluster.stop()
        raise
    finally:
        log.close()
