"""dglctl launch / status / stop / logs on the local default cluster (real processes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from dglctl.jobs.manifest import JobManifest, list_jobs
from testing.cli import run_cli as run
from testing.clusters import local_cluster as local_cluster_yaml
from testing.jobs import detached_job, dglctl_output
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.multiprocess
TRAINER = str(SCRIPTS / "trainer.py")


def _job_from(text: str) -> str:
    m = re.search(r"job (\d{4}-[0-9a-f]{6})", text)
    assert m, text
    return m.group(1)


def _trainers(cluster: Path) -> int:
    """How many trainers a job on ``cluster`` (a local cluster YAML) runs."""
    data = yaml.safe_load(cluster.read_text())
    return len(data["hosts"]) * data["trainers_per_host"]


def _detached_sleepers(parts, local_cluster, capsys, mode="sleep", **changes) -> str:
    """Launch a detached job of ``mode`` ('sleep') trainers on the local cluster with
    ``changes`` to its YAML; return its id once every trainer sleeps (their pulls and loaders
    went through)."""
    data = yaml.safe_load(local_cluster.read_text())
    local_cluster.write_text(yaml.safe_dump({**data, **changes}))
    code, out, err = run(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config",
                          str(parts[2]), "--detach", "--", mode], capsys)
    assert code == 0, err
    job = _job_from(out)
    n = _trainers(local_cluster)

    def sleeping() -> bool:
        nonlocal out
        out = run(["logs", job, "--role", "trainer"], capsys)[1]
        return out.count("sleeping") == n

    try:
        wait_until(sleeping, f"{n} trainers sleeping", timeout=6 * TIMEOUT, interval=0.5)
    except WaitTimeout:
        run(["stop", job], capsys)
        raise AssertionError(f"not every trainer started:\n{out}") from None
    return job


def test_launch_runs_to_completion(parts, home, full_local_cluster, capsys):
    code, out, err = run(["launch", TRAINER, "--cluster", str(full_local_cluster), "--part-config",
                          str(parts[2]), "--", "ok"], capsys)
    assert code == 0, err
    for rank in range(4):
        assert f"trainer {rank}] rank {rank}/4 pulled (400, 5)" in out
    assert out.count("] done") == 4
    job = list_jobs()[-1]
    assert job.state == "succeeded"
    assert leftovers(job.job_id) == ([], [])
    servers = [p for p in job.procs if p.role == "server"]
    assert len({p.port for p in servers}) == 1 and servers[0].port is not None
    host_record = json.loads((Path(job.hosts[1].workspace) / "jobs" / job.job_id /
                              "manifest.m1.json").read_text())
    assert {p["name"] for p in host_record["processes"]} == {"server-1-0", "trainer-1-0",
                                                              "trainer-1-1"}
    assert "token" not in json.dumps(host_record)


def test_failing_trainer_stops_everything(parts, home, local_cluster, capsys):
    t0 = time.monotonic()
    code, out, err = run(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config",
                          str(parts[2]), "--", "fail"], capsys)
    assert code == 1
    assert re.search(r"\[m1 trainer 1\] \(trainer-1-0, process group \d+\) exited with code 3",
                     err), err
    assert "rank 1 giving up" in err  # the last lines of its log
    job = list_jobs()[-1]
    assert job.state == "failed" and job.result["root_cause"] == "trainer-1-0"
    assert leftovers(job.job_id) == ([], [])
    assert time.monotonic() - t0 < 60


def test_crash_shows_traceback(parts, home, local_cluster, capsys):
    code, out, err = run(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config",
                          str(parts[2]), "--", "crash"], capsys)
    assert code == 1 and "deliberate crash in the training script" in err
    assert leftovers(list_jobs()[-1].job_id) == ([], [])


def test_killed_trainer_stops_job_within_seconds(parts, home, local_cluster, tmp_path):
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "launch", TRAINER, "--cluster",
                             str(local_cluster), "--part-config", str(parts[2]), "--", "sleep"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n = _trainers(local_cluster)

    def sleeping_victim() -> tuple[int, JobManifest] | None:
        jobs = list_jobs()
        if jobs and len([p for p in jobs[-1].procs if p.role == "trainer"]) == n:
            rec = next(p for p in jobs[-1].procs if p.name == "trainer-1-0")
            pidfile = Path(rec.log).with_suffix(".pid")
            if pidfile.exists() and b"sleeping" in Path(rec.log).read_bytes():
                return int(pidfile.read_text()), jobs[-1]
        return None

    try:
        victim, m = wait_until(sleeping_victim, "trainer-1-0 sleeping", timeout=6 * TIMEOUT,
                            interval=0.5)
    except WaitTimeout:
        proc.kill()
        proc.communicate()
        raise
    os.kill(victim, signal.SIGKILL)
    t_kill = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert time.monotonic() - t_kill < 20
    assert "[m1 trainer 1] (trainer-1-0" in err and "killed by signal 9 (SIGKILL)" in err
    assert leftovers(m.job_id) == ([], [])


def test_detach_status_stop_and_two_jobs(parts, home, local_cluster, capsys):
    jobs = []
    for _ in range(2):
        code, out, err = run(["launch", TRAINER, "--cluster", str(local_cluster),
                              "--part-config", str(parts[2]), "--detach", "--", "sleep"], capsys)
        assert code == 0, err
        jobs.append(_job_from(out))
    assert "in use; using" in err  # the second job moved to free ports
    for job in jobs:
        # The trainers connect to the servers once they have started (later on a busy machine).
        def served(job: str = job) -> list | None:
            code, out, err = run(["status", job, "--json"], capsys)
            assert code == 0, err
            st = json.loads(out)
            assert st["state"] == "running"
            assert [p["state"] for p in st["processes"]] == ["running"] * 4
            assert {p["device"] for p in st["processes"]} == {"cpu"}, "no --num-gpus"
            stats = [p["server_stats"] for p in st["processes"] if p["role"] == "server"]
            return stats if all(s and s["requests"] > 0 and s["clients"] >= 4
                                for s in stats) else None

        wait_until(served, "every server serving its 4 clients", timeout=6 * TIMEOUT,
                   interval=0.5)
    code, out, _ = run(["status"], capsys)
    assert all(j in out for j in jobs)
    code, out, err = run(["logs", jobs[0], "--role", "server"], capsys)
    assert code == 0
    code, out, err = run(["stop", jobs[0]], capsys)
    assert code == 0 and "stopped" in out
    assert leftovers(jobs[0]) == ([], [])
    st = json.loads(run(["status", jobs[1], "--json"], capsys)[1])
    assert st["state"] == "running", "stopping one job leaves the other running"
    code, out, _ = run(["stop", jobs[0]], capsys)
    assert code == 0 and "already stopped" in out
    code, out, _ = run(["status", jobs[0], "--json"], capsys)
    assert json.loads(out)["state"] == "stopped"
    assert run(["stop", "--all"], capsys)[0] == 0
    assert leftovers(jobs[1]) == ([], [])
    assert JobManifest.load(jobs[1]).state == "stopped"


def test_shared_memory_in_the_clusters_shm_dir(parts, home, local_cluster, tmp_path, capsys):
    """The cluster's env: DGLCTL_SHM_DIR reaches the processes, and stop cleans that folder
    (it used to look in /dev/shm only)."""
    shm = tmp_path / "shm"
    shm.mkdir()
    data = yaml.safe_load(local_cluster.read_text())
    env = {**data.get("env", {}), "DGLCTL_SHM_DIR": str(shm)}
    job = _detached_sleepers(parts, local_cluster, capsys, env=env, samplers_per_trainer=0)
    try:
        assert JobManifest.load(job).shm_dir == str(shm)
        assert sorted(shm.glob(f"dglctl.{job}.m*")), "the servers map the partition there"
        assert leftovers(job)[1] == [], "nothing of the job in /dev/shm"
        stale = shm / f"dglctl.{job}.m1.left-by-a-killed-process"
        stale.write_bytes(b"x")
    finally:
        code, out, err = run(["stop", job], capsys)
    assert code == 0, err
    assert not list(shm.glob(f"dglctl.{job}.*"))
    assert leftovers(job) == ([], [])


def test_bad_inputs(parts, home, local_cluster, tmp_path, capsys):
    base = ["launch", "--part-config"]
    # more partitions than hosts
    code, _, err = run([*base, str(parts[3]), "--cluster", str(local_cluster), TRAINER], capsys)
    assert code == 2 and "3 parts" in err and "2 host(s)" in err
    # malformed YAML: file and line
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  - {address: 127.0.0.1\nworkspace: x\n")
    code, _, err = run([*base, str(parts[2]), "--cluster", str(bad), TRAINER], capsys)
    assert code == 2 and "bad.yaml:" in err and "not valid YAML" in err
    # unknown key with a suggestion
    bad.write_text("hosts: [127.0.0.1]\nworkspce: /tmp/x\n")
    code, _, err = run([*base, str(parts[2]), "--cluster", str(bad), TRAINER], capsys)
    assert code == 2 and "workspce" in err and "did you mean 'workspace'" in err
    # missing partition config
    code, _, err = run([*base, str(tmp_path / "nope.json"), "--cluster", str(local_cluster),
                        TRAINER],
                       capsys)
    assert code == 2 and "nope.json" in err
    # a missing shard
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(parts[2].parent, broken)
    victim = next((broken / "part1" / "graph").glob("*indices.npy"))
    victim.unlink()
    code, _, err = run([*base, str(broken / "g.json"), "--cluster", str(local_cluster),
                        TRAINER], capsys)
    assert code == 2 and victim.name in err and "missing" in err
    # port in use, with an explicit --port-base
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen()
        port = s.getsockname()[1]
        code, _, err = run([*base, str(parts[2]), "--cluster", str(local_cluster),
                            "--port-base", str(port), TRAINER, "ok"], capsys)
    assert code == 2 and f"host m1: port(s) {port} in use" in err
    assert "Traceback" not in err


def _launch_sleeping(parts, local_cluster, capsys) -> tuple[subprocess.Popen, str]:
    """A job of 'sleep' trainers launched in the foreground, once every trainer sleeps (its
    sampler processes started)."""
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "launch", TRAINER, "--cluster",
                             str(local_cluster), "--part-config", str(parts[2]), "--", "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n = _trainers(local_cluster)

    def sleeping() -> str | None:
        jobs = list_jobs()
        if jobs and jobs[-1].state == "running":
            _, out, _ = run(["logs", jobs[-1].job_id], capsys)
            if out.count("sleeping") == n:
                return jobs[-1].job_id
        return None

    try:
        return proc, wait_until(sleeping, f"{n} trainers sleeping", timeout=9 * TIMEOUT,
                                interval=0.5)
    except WaitTimeout:
        proc.kill()
        proc.communicate()
        raise


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_launch_stops_the_job(parts, home, local_cluster, sig, capsys):
    proc, _ = _launch_sleeping(parts, local_cluster, capsys)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err  # 130 for SIGINT, 143 for SIGTERM
    assert "stopping job" in err
    m = JobManifest.load(list_jobs()[-1].job_id)
    assert m.state == "stopped"
    assert leftovers(m.job_id) == ([], [])


def test_dglctl_stop_of_a_supervised_job_is_a_stop_not_a_failure(parts, home, local_cluster,
                                                                  capsys):
    """The launcher used to report the trainers that 'dglctl stop' ended (from another
    terminal) as the job's failure: 'killed by signal 15', exit code 1, state failed."""
    proc, job = _launch_sleeping(parts, local_cluster, capsys)
    code, out, _ = run(["stop", job], capsys)
    assert code == 0 and f"job {job} stopped" in out
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"job {job} was stopped by 'dglctl stop'" in err
    assert "failed" not in err and "signal 15" not in err
    assert JobManifest.load(job).state == "stopped"
    assert leftovers(job) == ([], [])


def test_launch_from_ip_config(parts, home, tmp_path, capsys):
    import random

    port = random.randint(20000, 50000)
    ip = tmp_path / "ip_config.txt"
    ip.write_text(f"127.0.0.1 {port}\n127.0.0.2 {port}\n")
    code, out, err = run(["launch", TRAINER, "--ip-config", str(ip), "--num-trainers", "1",
                          "--part-config", str(parts[2]), "--", "ok"], capsys)
    assert code == 0, err
    assert "[m1 trainer 1] rank 1/2" in out
    assert leftovers(list_jobs()[-1].job_id) == ([], [])
    ip.write_text(f"127.0.0.1 {port}\n127.0.0.2 {port + 5}\n")
    code, _, err = run(["launch", "--ip-config", str(ip), "--part-config",
                        str(parts[2]), TRAINER], capsys)
    assert code == 2 and "same port" in err


def test_detached_job_from_ip_config_has_status_logs_and_stop(parts, home, tmp_path, capsys):
    """status, logs and stop of a job launched with --ip-config rebuild its hosts from that
    file (they reloaded the ip_config as a cluster YAML and failed)."""
    import random

    port = random.randint(20000, 50000)
    ip = tmp_path / "ip_config.txt"
    ip.write_text(f"127.0.0.1 {port}\n127.0.0.2 {port}\n")
    code, out, err = run(["launch", TRAINER, "--ip-config", str(ip), "--num-trainers", "1",
                          "--part-config", str(parts[2]), "--detach", "--", "sleep"], capsys)
    assert code == 0, err
    job = _job_from(out)
    try:
        code, out, err = run(["status", job, "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["state"] == "running"
        code, out, err = run(["logs", job, "--role", "trainer"], capsys)
        assert code == 0, err
    finally:
        code, out, err = run(["stop", job], capsys)
    assert code == 0 and "stopped" in out, err
    assert leftovers(job) == ([], [])


@pytest.fixture(scope="class")
def encrypted_cached_job(parts, tmp_path_factory):
    """One detached job for the status tests that only read it: encrypted (CURVE), with a
    feature cache whose trainers read the other machine's rows through it, then sleep in a
    loader (with its sampler processes). Stopped, and proven gone, after the class."""
    root = tmp_path_factory.mktemp("status-job")
    cluster = local_cluster_yaml(root / "local.yaml", root / "ws", trainers_per_host=1,
                                 encrypt=True, feature_cache_gb=0.001)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DGLCTL_HOME", str(root / "home"))  # for the in-process dglctl calls
        with detached_job(root / "home", [TRAINER, "--cluster", str(cluster), "--part-config",
                                          str(parts[2]), "--", "cache-sleep"]) as job:
            n = _trainers(cluster)
            wait_until(lambda: dglctl_output(root / "home", "logs", job, "--role",
                                             "trainer").count("sleeping") == n,
                       f"every trainer of job {job} sleeping", 6 * TIMEOUT,
                       interval=0.5)  # each look starts a dglctl process
            yield job


class TestStatusOfARunningJob:
    """'dglctl status' of one running job, read by each test."""

    def test_encrypted_job_runs_and_reports_status(self, encrypted_cached_job, capsys):
        """encrypt: true in the cluster YAML: servers, trainers (with their sampler
        processes), the launcher's readiness probe and 'dglctl status' all speak CURVE."""
        st = json.loads(run(["status", encrypted_cached_job, "--json"], capsys)[1])
        assert st["state"] == "running"
        assert all(p["state"] == "running" for p in st["processes"]), st["processes"]
        assert {p["role"] for p in st["processes"]} == {"server", "trainer"}
        served = [p["server_stats"] for p in st["processes"] if p["role"] == "server"]
        assert all(s and s["requests"] > 0 for s in served), served

    def test_status_shows_each_trainers_feature_cache(self, encrypted_cached_job, capsys):
        """feature_cache_gb: each trainer reports its cache counters to its machine's
        server, and 'dglctl status' shows them on the trainer's row (hits, lookups, rows
        kept)."""
        st = json.loads(run(["status", encrypted_cached_job, "--json"], capsys)[1])
        code, out, err = run(["status", encrypted_cached_job], capsys)
        assert code == 0, err
        trainers = [p for p in st["processes"] if p["role"] == "trainer"]
        assert [p["rank"] for p in trainers] == [0, 1]
        kept = {}
        for p in trainers:
            (counters,) = p["feature_cache"].values()  # one tensor read: feat
            # Each reads all 400 rows 19 times, those of the other machine through the
            # cache, which keeps all of them; the last read (after the report interval) and
            # at least the one before it found every one kept.
            other = counters["rows"]
            kept[p["host"]] = other
            assert counters["lookups"] >= 18 * other, p
            assert 2 * other <= counters["hits"] < counters["lookups"], p
        assert kept["m0"] + kept["m1"] == 400 and min(kept.values()) > 0, kept
        assert all(p["feature_cache"] is None for p in st["processes"] if p["role"] == "server")
        assert all("caches" not in p["server_stats"] for p in st["processes"]
                   if p["role"] == "server"), "the counters are the trainers', not the servers'"
        rows = [line for line in out.splitlines() if " trainer " in line]
        assert len(rows) == 2 and all(re.search(r"feature cache: \d+% hits of [\d,]+ remote "
                                                r"rows \(\d+ kept\)", line) for line in rows), out


def test_status_waits_for_a_stalled_server_as_long_as_the_job_does(parts, home, local_cluster,
                                                                    capsys):
    """A server paused for less than the job's timeout still answers status (which used to
    give up after a fixed 3 s and report no server figures)."""
    import threading

    job = _detached_sleepers(parts, local_cluster, capsys, timeout=8)
    server = next(p for p in JobManifest.load(job).procs if p.role == "server")
    pid = int(Path(server.log).with_suffix(".pid").read_text())
    try:
        os.kill(pid, signal.SIGSTOP)
        resume = threading.Timer(5.0, os.kill, (pid, signal.SIGCONT))
        resume.start()
        try:
            st = json.loads(run(["status", job, "--json"], capsys)[1])
        finally:
            resume.cancel()
            os.kill(pid, signal.SIGCONT)
        stats = {p["rank"]: p["server_stats"] for p in st["processes"] if p["role"] == "server"
                 and p["host"] == "m0"}
        assert stats[0] and stats[0]["requests"] > 0, st["processes"]
    finally:
        assert run(["stop", job], capsys)[0] == 0
    assert leftovers(job) == ([], [])


def _agents(launcher: int) -> dict[str, list[int]]:
    """Running host-agent processes started by the launcher process ``launcher`` (the local
    transport runs them as its children): their pids by agent command (serve, probe, ...)."""
    found: dict[str, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            ppid = int((p / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"dglctl.agent" in argv and ppid == launcher:
            cmd = argv[argv.index(b"dglctl.agent") + 1].decode()
            found.setdefault(cmd, []).append(int(p.name))
    return found


def test_supervision_polls_one_agent_per_host(parts, home, local_cluster):
    """While a job runs, the launcher polls one long-lived agent per host: no agent is
    started per poll; the agents end with the launcher, even when it is SIGKILLed."""
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "launch", "--cluster",
                             str(local_cluster), "--part-config", str(parts[2]), TRAINER,
                             "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(_agents(proc.pid).get("serve", [])) >= 2,
                   "an agent session on each host", timeout=6 * TIMEOUT, interval=0.2)
        seen: dict[str, set[int]] = {}
        for _ in range(20):  # 2 s of supervision: probes, logs and renewals every 0.3 s
            for cmd, pids in _agents(proc.pid).items():
                seen.setdefault(cmd, set()).update(pids)
            time.sleep(0.1)
        assert set(seen) == {"serve"} and len(seen["serve"]) == 2, seen  # no per-poll agent
        serving = sorted(seen["serve"])
    finally:
        proc.kill()
        proc.communicate()
    wait_until(lambda: not [p for p in serving if Path(f"/proc/{p}").exists()
                            and b"serve" in _cmdline(Path(f"/proc/{p}"))],
               "the agent sessions gone with their launcher", timeout=2 * TIMEOUT,
               interval=0.1)
    main(["stop", list_jobs()[-1].job_id])


def _cmdline(p: Path) -> bytes:
    try:
        return (p / "cmdline").read_bytes()
    except OSError:
        return b""
