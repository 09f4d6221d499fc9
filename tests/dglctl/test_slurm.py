"""``dglctl launch --slurm`` on a real Slurm (testing/slurm.py: slurmctld and two slurmd,
n1 at 127.0.0.1 and n2 at 127.0.0.2): the allocation's nodes are the hosts, job steps the
channel, and what a step started ends with it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from dglctl.config import parse_cluster_config
from dglctl.hosts.slurm_alloc import cluster_from_allocation
from dglctl.jobs.manifest import list_jobs
from partitioner import partition_graph
from partitioner.generate import generate_graph
from testing.ports import free_port_range
from testing.procs import leftovers
from testing.slurm import NODES, start_slurm
from testing.timeouts import RUN_TIMEOUT, TIMEOUT
from testing.wait import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("slurm")]
REPO = Path(__file__).resolve().parents[2]
TRAINER = str(Path(__file__).parent / "scripts" / "trainer.py")
EXAMPLE = ["--graph-name", "g", "--num-epochs", "2", "--batch-size", "200", "--fan-out",
           "5,10", "--lr", "0.01"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def graph_parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm-parts")
    partition_graph(generate_graph(3000, avg_degree=10, seed=1), "g", 2, root)
    return root / "g.json"


def _cluster(tmp_path: Path) -> Path:
    path = tmp_path / "slurm.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "slurm", "workspace": str(tmp_path / "ws"), "python": sys.executable,
        "timeout": TIMEOUT, "port_base": free_port_range(list(NODES.values()), 4)}))
    return path


def _accuracy(out: str) -> float:
    m = re.search(r"test accuracy ([0-9.]+)", out)
    assert m, out[-3000:]
    return float(m.group(1))


def test_slurm_outside_an_allocation_says_how_to_get_one(graph_parts, monkeypatch, capsys):
    for k in [k for k in os.environ if k.startswith("SLURM_JOB")]:
        monkeypatch.delenv(k)
    code = main(["launch", "--slurm", "--part-config", str(graph_parts),
                 str(REPO / "examples" / "train_dist.py")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "not inside a Slurm allocation" in err and "salloc -N2" in err, err


def test_the_example_trains_across_two_slurm_nodes_as_on_the_local_cluster(
        slurm, graph_parts, tmp_path, home, local_cluster, capsys):
    cluster = _cluster(tmp_path)
    env = {"DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}
    r = slurm.run("salloc", "-N2", sys.executable, "-m", "dglctl", "launch", "--cluster",
                  str(cluster), "--part-config", str(graph_parts),
                  str(REPO / "examples" / "train_dist.py"), *EXAMPLE,
                  timeout=RUN_TIMEOUT, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    slurm_acc = _accuracy(r.stdout)
    # The same run on the local cluster (same graph, script, seed), for the accuracy it gets.
    assert main(["launch", "--cluster", str(local_cluster), "--part-config", str(graph_parts),
                 str(REPO / "examples" / "train_dist.py"), *EXAMPLE]) == 0
    local_acc = _accuracy(capsys.readouterr().out)
    assert slurm_acc > 0.4 and slurm_acc >= local_acc - 0.1, (slurm_acc, local_acc)
    # Nothing of the job is left: no step, no process, no shared memory.
    assert slurm.settled() == ([], [])
    job = re.search(r"job (\S+)", r.stderr + r.stdout)
    assert job
    assert leftovers(job.group(1)) == ([], [])


def test_a_crashing_trainer_fails_the_job_with_its_cause_and_leaves_no_step(
        slurm, graph_parts, tmp_path, home):
    env = {"DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}
    r = slurm.run("salloc", "-N2", sys.executable, "-m", "dglctl", "launch", "--cluster",
                  str(_cluster(tmp_path)), "--part-config", str(graph_parts), TRAINER,
                  "crash", timeout=RUN_TIMEOUT, env=env, cwd=str(tmp_path))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "deliberate crash in the training script" in r.stderr, r.stderr[-3000:]
    assert "[n1 trainer 0]" in r.stderr, r.stderr[-3000:]  # the root cause, by node
    assert slurm.settled() == ([], [])
    job = list_jobs()[-1]
    assert job.state == "failed" and job.result["root_cause"] == "trainer-0-0"
    assert leftovers(job.job_id) == ([], [])


def test_the_script_slurm_script_writes_runs_under_sbatch(slurm, graph_parts, tmp_path, home,
                                                          capsys):
    script = tmp_path / "job.sh"
    code = main(["slurm-script", "-N", "2", "-t", "10:00", "--output", "job-%j.out", "--out",
                 str(script), "--cluster", str(_cluster(tmp_path)), "--part-config",
                 str(graph_parts), str(REPO / "examples" / "train_dist.py"), *EXAMPLE])
    assert code == 0, capsys.readouterr().err
    # --wait: sbatch exits when the job ends, with the job's exit code.
    r = slurm.run("sbatch", "--wait", "--parsable", str(script), timeout=RUN_TIMEOUT,
                  env={"DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}, cwd=str(tmp_path))
    job = r.stdout.strip().split(";")[0]
    out = tmp_path / f"job-{job}.out"
    text = out.read_text() if out.exists() else "(no output file)"
    assert r.returncode == 0, r.stderr + text[-3000:]
    assert _accuracy(text) > 0.4, text[-3000:]
    assert slurm.settled() == ([], [])


def test_a_failing_batch_job_exits_with_the_launchs_code(slurm, graph_parts, tmp_path, home,
                                                         capsys):
    script = tmp_path / "job.sh"
    assert main(["slurm-script", "-N", "2", "--output", "job-%j.out", "--out", str(script),
                 "--cluster", str(_cluster(tmp_path)), "--part-config", str(graph_parts),
                 TRAINER, "fail"]) == 0
    r = slurm.run("sbatch", "--wait", "--parsable", str(script), timeout=RUN_TIMEOUT,
                  env={"DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}, cwd=str(tmp_path))
    job = r.stdout.strip().split(";")[0]
    text = (tmp_path / f"job-{job}.out").read_text()
    assert r.returncode == 1, r.stderr + text[-3000:]
    assert "rank 1 giving up" in text
    # Slurm's own record of the job says it failed, with the launch's exit code.
    shown = slurm.run("scontrol", "show", "job", job).stdout
    assert "JobState=FAILED" in shown and "ExitCode=1:0" in shown, shown


def _sleeping_job(slurm, graph_parts, tmp_path, home, tasks_per_node: int = 1,
                  salloc: tuple[str, ...] = ()):
    """``salloc -N2 --ntasks-per-node T SALLOC dglctl launch ... trainer.py sleep`` started:
    its process and the job's manifest once every trainer sleeps."""
    env = {**slurm.env, "DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        ["salloc", "-N2", f"--ntasks-per-node={tasks_per_node}", *salloc, sys.executable, "-m",
         "dglctl", "launch", "--cluster",
         str(_cluster(tmp_path)), "--part-config", str(graph_parts), TRAINER, "sleep"],
        env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def sleeping():
        assert proc.poll() is None, "the launch ended"
        jobs = list_jobs()
        trainers = [p for p in jobs[-1].procs if p.role == "trainer"] if jobs else []
        if len(trainers) == 2 * tasks_per_node and all(
                Path(p.log).exists() and b"sleeping" in Path(p.log).read_bytes()
                for p in trainers):
            return jobs[-1]
        return None

    try:
        return proc, wait_until(sleeping, f"{2 * tasks_per_node} trainers sleeping",
                                timeout=12 * TIMEOUT, interval=0.5)
    except AssertionError:  # a WaitTimeout too
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the trainers did not start: {err[-2000:]}") from None


@pytest.fixture
def in_slurm(slurm, monkeypatch):
    """This process's dglctl commands reach the test Slurm (srun, scontrol)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm


def test_status_and_stop_from_outside_the_allocation(in_slurm, graph_parts, tmp_path, home,
                                                     capsys):
    # --ntasks-per-node 2: two trainers a node (the YAML sets none).
    proc, job = _sleeping_job(in_slurm, graph_parts, tmp_path, home, tasks_per_node=2)
    try:
        assert main(["status", job.job_id, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["state"] == "running"
        trainers = [p["host"] for p in status["processes"] if p["role"] == "trainer"]
        assert sorted(trainers) == ["n1", "n1", "n2", "n2"], status
        assert main(["logs", job.job_id]) == 0
        assert "sleeping" in capsys.readouterr().out
        assert main(["stop", job.job_id]) == 0
        out, err = proc.communicate(timeout=12 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0 and "stopped by 'dglctl stop'" in err, err[-2000:]
    assert leftovers(job.job_id) == ([], [])
    assert in_slurm.settled() == ([], [])
    assert list_jobs()[-1].state == "stopped"


def test_scancel_mid_job_leaves_nothing(slurm, graph_parts, tmp_path, home):
    proc, ready = _sleeping_job(slurm, graph_parts, tmp_path, home)
    try:
        procs, _ = leftovers(ready.job_id)
        assert procs  # the job runs: servers, trainers
        (alloc,) = slurm.jobs()
        assert slurm.run("scancel", alloc).returncode == 0
        out, err = proc.communicate(timeout=12 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0, err[-2000:]
    # Processes (ended by Slurm) and shared memory (removed by the agent sessions on TERM).
    wait_until(lambda: leftovers(ready.job_id) == ([], []), "nothing of the job left",
               timeout=6 * TIMEOUT, interval=0.5)
    assert slurm.settled() == ([], [])
    job = list_jobs()[-1]
    cause = f"Slurm job {alloc} was cancelled (scancel)"
    assert job.state == "failed" and cause in job.result["cause"], (job.result, err[-2000:])
    assert cause in err


def test_check_inside_an_allocation_checks_its_nodes(slurm, graph_parts, tmp_path, home):
    """No --cluster inside an allocation: the allocation's nodes are checked."""
    r = slurm.run("salloc", "-N2", sys.executable, "-m", "dglctl", "check", "--json",
                  "--part-config", str(graph_parts), timeout=30 * TIMEOUT,
                  env={"DGLCTL_HOME": str(home), "PYTHONPATH": str(REPO)}, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert [h["name"] for h in report["hosts"]] == list(NODES)
    assert [h["data_address"] for h in report["hosts"]] == list(NODES.values())
    assert report["problems"] == []


def test_files_go_through_a_step_where_the_workspace_is_not_shared(in_slurm, tmp_path):
    """The path a node whose workspace this machine cannot see takes (here every node shares
    this machine's disk, so the detection is overruled): bytes through srun's stdin, the file
    in place atomically with its mode, the node's checksum that of the bytes sent."""
    from dglctl.hosts.agent_client import AgentClient
    from dglctl.hosts.slurm_alloc import current_allocation
    from dglctl.hosts.transports import make_transport

    r = in_slurm.run("salloc", "-N2", "--no-shell", timeout=10 * TIMEOUT)
    job = re.search(r"Granted job allocation (\d+)", r.stderr)
    assert job, r.stderr
    try:
        cluster = parse_cluster_config({"transport": "slurm", "workspace": str(tmp_path / "ws"),
                                        "python": sys.executable}, "s.yaml")
        env = {"SLURM_JOB_ID": job.group(1), "SLURM_JOB_NODELIST": "n[1-2]"}
        cluster = cluster_from_allocation(current_allocation(env), cluster)
        t = make_transport(cluster.hosts[1], cluster)
        assert t.shares_workspace()  # one machine: the marker is seen
        t._shared = False
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(3 << 20))
        sent = t.put(big, "data/big.bin")
        small = t.put_bytes(b"token", "jobs/x/env.json", mode=0o600)
        got = AgentClient(t).checksums(t.workspace, ["data/big.bin", "jobs/x/env.json"])
        assert got["data/big.bin"].xxh3_128 == sent.xxh3_128
        assert got["jobs/x/env.json"].xxh3_128 == small.xxh3_128
        assert (tmp_path / "ws" / "data" / "big.bin").read_bytes() == big.read_bytes()
        assert (tmp_path / "ws" / "jobs" / "x" / "env.json").stat().st_mode & 0o777 == 0o600
        assert not list((tmp_path / "ws" / "data").glob(".*tmp*"))  # no temporary left
    finally:
        in_slurm.run("scancel", job.group(1))
    assert in_slurm.settled() == ([], [])


def test_a_job_past_its_time_limit_ends_with_that_cause(slurm, graph_parts, tmp_path, home):
    """Slurm ends an allocation past its time limit (its check runs every 30 s or so); the
    launch says why, and nothing is left. The allocation asks for 5 minutes and, once the
    trainers run, an administrator's ``scontrol update EndTime=now`` brings its end
    forward: Slurm's own time-limit kill then comes at its next check, not minutes later
    (``-t 1``, the shortest limit, took a minute and a check)."""
    proc, job = _sleeping_job(slurm, graph_parts, tmp_path, home, salloc=("-t", "5"))
    try:
        (allocation,) = slurm.jobs()
        moved = slurm.run("scontrol", "update", f"JobId={allocation}", "EndTime=now")
        assert moved.returncode == 0, moved.stderr
        out, err = proc.communicate(timeout=12 * TIMEOUT + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0, err[-2000:]
    job = list_jobs()[-1]
    assert "reached its time limit" in job.result["cause"], (job.result, err[-2000:])
    assert "reached its time limit" in err
    assert leftovers(job.job_id) == ([], [])
    assert slurm.settled() == ([], [])


def test_a_nodes_agent_finds_its_own_node_address(in_slurm, tmp_path):
    """Preflight's address for a NodeAddr only the nodes resolve: in a step, the agent asks
    scontrol for its node's NodeAddr and resolves it there."""
    r = in_slurm.run("salloc", "-N2", "srun", "--overlap", "-N1", "-n1", "-w", "n2",
                     sys.executable, "-m", "dglctl.agent", "preflight", "--workspace",
                     str(tmp_path / "ws"), "--bind", "@ssh", "--ports", "",
                     timeout=20 * TIMEOUT, env={"PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert (report["bind_address"], report["bind_error"]) == (NODES["n2"], None), report


def test_ctrl_c_in_the_allocation_stops_the_job_and_its_steps(slurm, graph_parts, tmp_path,
                                                              home):
    proc, job = _sleeping_job(slurm, graph_parts, tmp_path, home)
    try:
        os.kill(job.launcher["pid"], signal.SIGINT)  # the launcher, as a terminal's Ctrl-C
        out, err = proc.communicate(timeout=12 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    assert leftovers(job.job_id) == ([], [])
    assert slurm.settled() == ([], [])
    assert list_jobs()[-1].state == "stopped"


def test_a_sigkilled_launcher_leaves_nothing_in_the_allocation(slurm, graph_parts, tmp_path,
                                                               home):
    """The launcher killed outright: its srun processes see their stdin close, each node's
    agent step ends, and Slurm ends what the step started (no lease to wait for)."""
    proc, job = _sleeping_job(slurm, graph_parts, tmp_path, home)
    try:
        os.kill(job.launcher["pid"], signal.SIGKILL)
        proc.communicate(timeout=12 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    wait_until(lambda: leftovers(job.job_id) == ([], []), "nothing of the job left",
               timeout=6 * TIMEOUT, interval=0.5)
    assert slurm.settled() == ([], [])
