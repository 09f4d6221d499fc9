"""What a job's record lets 'dglctl status', 'logs' and 'stop' do: a launch that fails at
preflight or at the copy is recorded as failed with its phase and cause (not 'starting' for
good), and a job is found and reached from any folder, after its YAML was edited or deleted.
Real launches on the local cluster; a real refusal from a port nobody listens on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from dglctl.jobs.manifest import JobState, list_jobs
from testing.ports import any_port
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.multiprocess

TRAINER = str(SCRIPTS / "trainer.py")


def _run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_launch_that_fails_at_preflight_is_recorded_as_failed(parts, home, tmp_path, capsys):
    """An SSH host that refuses the connection: the job is 'failed' at preflight, with the
    host's error as its cause, and status and stop ask no host (there is nothing to ask)."""
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"port": any_port("127.0.0.1"), "strict_host_keys": False,
                                    "connect_timeout": TIMEOUT, "config": "/dev/null"},
        "hosts": ["127.0.0.1", "127.0.0.2"], "workspace": str(tmp_path / "ws")}))
    code, _, err = _run(["launch", "--cluster", str(cluster), "--part-config", str(parts[2]),
                         TRAINER], capsys)
    assert code != 0 and "127.0.0.1" in err, err
    (job,) = list_jobs()
    assert job.state == JobState.FAILED and job.procs == [] and job.ended is not None
    assert job.result["phase"] == "preflight" and "127.0.0.1" in job.result["cause"]
    assert f"job {job.job_id} is recorded as failed" in err, err
    code, out, err = _run(["status"], capsys)
    assert code == 0 and re.search(rf"{job.job_id}\s+failed .*\(at preflight\)", out), out
    code, out, err = _run(["status", job.job_id], capsys)
    assert code == 0, err
    assert f"job {job.job_id}: failed" in out and "failed at preflight: " in out, out
    assert "no process was started" in out
    code, out, _ = _run(["status", job.job_id, "--json"], capsys)
    assert json.loads(out)["result"]["phase"] == "preflight"
    code, out, err = _run(["stop", job.job_id], capsys)
    assert code == 0 and "already failed; nothing to stop" in out, out + err


def test_a_launch_that_fails_at_the_copy_is_recorded_as_failed(parts, home, local_cluster,
                                                               tmp_path, capsys):
    """A file where host m1's data folder should be: the copy fails there."""
    ws = Path(yaml.safe_load(local_cluster.read_text())["workspace"])
    (ws / "m1").mkdir(parents=True)
    (ws / "m1" / "data").write_text("not a folder\n")
    code, _, err = _run(["launch", "--cluster", str(local_cluster), "--part-config",
                         str(parts[2]), TRAINER], capsys)
    assert code != 0 and "host m1" in err, err
    (job,) = list_jobs()
    assert job.state == JobState.FAILED and job.result["phase"] == "copy", job.result
    assert "host m1" in job.result["cause"]
    code, out, _ = _run(["status", job.job_id], capsys)
    assert code == 0 and "failed at copy: " in out and "host m1" in out, out
    assert leftovers(job.job_id) == ([], [])


def test_a_launch_whose_servers_fail_is_recorded_as_failed_at_servers(parts, home,
                                                                      local_cluster,
                                                                      tmp_path, capsys):
    """The servers' shared-memory folder is a file: every server fails while it loads."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    data = yaml.safe_load(local_cluster.read_text())
    local_cluster.write_text(yaml.safe_dump(
        {**data, "env": {**data.get("env", {}), "DGLCTL_SHM_DIR": str(blocked)}}))
    code, _, err = _run(["launch", "--cluster", str(local_cluster), "--part-config",
                         str(parts[2]), TRAINER], capsys)
    assert code == 1 and "server" in err, err
    (job,) = list_jobs()
    assert job.state == JobState.FAILED and job.result["phase"] == "servers", job.result
    assert job.result["root_cause"].startswith("server-") and job.result["cause"]
    code, out, _ = _run(["status", job.job_id], capsys)
    assert code == 0 and "failed at servers: " in out, out
    assert leftovers(job.job_id) == ([], [])


def test_status_logs_and_stop_from_another_folder_and_without_the_yaml(
        parts, home, local_cluster, tmp_path, capsys, monkeypatch):
    """Launched with a relative --cluster from one folder; then status, logs and stop from
    another, and again after the YAML was deleted: the manifest keeps the resolved cluster."""
    here = tmp_path / "launched-here"
    here.mkdir()
    shutil.copy(local_cluster, here / "cluster.yaml")
    monkeypatch.chdir(here)
    code, out, err = _run(["launch", "--cluster", "cluster.yaml", "--part-config",
                           str(parts[2]), "--detach", TRAINER, "sleep"], capsys)
    assert code == 0, err
    job = list_jobs()[-1].job_id
    try:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        def sleeping() -> bool:
            code, logs, err = _run(["logs", job, "--role", "trainer"], capsys)
            assert code == 0, err
            return logs.count("sleeping") == 2

        wait_until(sleeping, "2 trainers sleeping", timeout=6 * TIMEOUT, interval=0.5)
        code, out, err = _run(["status", job], capsys)
        assert code == 0 and f"job {job}: running" in out, out + err
        (here / "cluster.yaml").unlink()
        code, out, err = _run(["status", job], capsys)
        assert code == 0 and f"job {job}: running" in out, out + err
        assert out.count(" running ") >= 2 + 2, out  # 2 trainers and 2 servers
        code, out, err = _run(["stop", job], capsys)
        assert code == 0 and f"job {job} stopped" in out, out + err
    finally:
        main(["stop", job])
    assert leftovers(job) == ([], [])
