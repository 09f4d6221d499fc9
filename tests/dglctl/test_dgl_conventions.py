"""DGL's and torchrun's conventions: launcher options before SCRIPT and everything after it
for the script, DGL's spellings named, the launcher's ip_config and part config winning over
the script's, torchrun's environment, an OMP default, and the uncaught exception as the root
cause. Real launches on the local cluster where processes matter."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from dglctl.cli import main
from dglctl.jobs.manifest import list_jobs
from testing.cli import run_cli as run
from testing.procs import leftovers
from tests.dglctl import SCRIPTS

SCRIPT = str(SCRIPTS / "dgl_style.py")


def _plan(argv, capsys) -> dict:
    code, out, err = run(argv, capsys)
    assert code == 0, err
    return json.loads(out)


def _trainer_argv(plan: dict) -> list[str]:
    return next(p["argv"] for p in plan["processes"] if p["role"] == "trainer")


@pytest.mark.unit
def test_everything_after_script_goes_to_the_script(parts, home, full_local_cluster, capsys):
    plan = _plan(["launch", "--cluster", str(full_local_cluster), "--part-config", str(parts[2]),
                  "--dry-run", "--json", SCRIPT, "--epochs", "5", "--part_config", "x.json",
                  "--num-trainers", "7"], capsys)
    assert _trainer_argv(plan)[1:] == ["dgl_style.py", "--epochs", "5", "--part_config",
                                       "x.json", "--num-trainers", "7"]
    assert len([p for p in plan["processes"] if p["role"] == "trainer"]) == 4  # not 7 x 2
    # The older order: launcher options between SCRIPT and '--'.
    old = _plan(["launch", SCRIPT, "--cluster", str(full_local_cluster), "--part-config",
                 str(parts[2]), "--dry-run", "--json", "--", "--epochs", "5"], capsys)
    assert _trainer_argv(old)[1:] == ["dgl_style.py", "--epochs", "5"]


@pytest.mark.unit
@pytest.mark.parametrize("argv, says", [
    (["--num-trainer", "2", SCRIPT], "Did you mean one of: '--num-samplers', '--num-servers', "
                                     "'--num-trainers'"),
    ([SCRIPT, "--num-trainer", "2", "--", "env"], "No such option '--num-trainer'"),
    (["--num_trainers", "2", SCRIPT], "--num_trainers is DGL's launch.py spelling: dglctl's "
                                      "option is --num-trainers"),
    ([SCRIPT, "--part_config", "p.json", "--", "env"], "dglctl's option is --part-config"),
    (["--num_omp_threads", "4", SCRIPT], "set OMP_NUM_THREADS in the cluster YAML's env:"),
])
def test_a_wrong_launcher_option_is_named_never_passed_on(argv, says, parts, home,
                                                          full_local_cluster, capsys):
    code, out, err = run(["launch", "--cluster", str(full_local_cluster), *argv], capsys)
    assert code == 2 and says in err, err
    assert list_jobs() == []


@pytest.mark.unit
def test_a_launcher_option_after_script_is_explained(full_local_cluster, home, capsys):
    code, _, err = run(["launch", "--cluster", str(full_local_cluster), SCRIPT, "--part-config",
                        "p.json"], capsys)
    assert code == 2 and "Missing option '--part-config'" in err
    assert "--part-config stands after SCRIPT, so it goes to the script" in err


@pytest.mark.unit
def test_dry_run_shows_torchruns_environment(parts, home, full_local_cluster, capsys):
    plan = _plan(["launch", "--cluster", str(full_local_cluster), "--part-config", str(parts[2]),
                  "--dry-run", "--json", SCRIPT, "env"], capsys)
    trainers = [p for p in plan["processes"] if p["role"] == "trainer"]
    for p in trainers:
        e, host = p["env"], int(p["name"].split("-")[1])
        assert (e["RANK"], e["ROLE_RANK"], e["LOCAL_RANK"]) == (str(p["rank"]), str(p["rank"]),
                                                               str(p["local_rank"]))
        assert (e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"]) == ("4", "2", str(host))
        assert e["TORCHELASTIC_RUN_ID"] == plan["job_id"]
        assert e["TORCHELASTIC_ERROR_FILE"].endswith(f"/jobs/{plan['job_id']}/{p['name']}"
                                                     ".error.json")
        assert e["MASTER_PORT"] == str(plan["master_port"])


@pytest.mark.multiprocess
def test_dgl_script_runs_with_its_own_paths_and_torchrun_env(parts, home, full_local_cluster,
                                                             capsys):
    data = yaml.safe_load(full_local_cluster.read_text())
    data["env"] = {k: v for k, v in data.get("env", {}).items() if k != "OMP_NUM_THREADS"}
    data["samplers_per_trainer"] = 0
    full_local_cluster.write_text(yaml.safe_dump(data))
    code, out, err = run(["launch", "--cluster", str(full_local_cluster), "--part-config",
                          str(parts[2]), SCRIPT, "--ip_config", "ip_config_of_my_laptop.txt",
                          "--part_config", "data/of/my/laptop.json", "env"], capsys)
    assert code == 0, err
    envs = [json.loads(line.split("ENV ", 1)[1]) for line in out.splitlines() if "ENV " in line]
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]
    job = list_jobs()[-1].job_id
    cpus = len(os.sched_getaffinity(0))
    # Each host: 1 server and 2 trainers, no sampler: the rest of the cores shared.
    omp = str(max(1, (cpus - 1) // 2))
    # Both hosts are this machine: with no core left for a prefetch thread, none is made.
    prefetch = "0" if 2 * (1 + 2) >= cpus else None
    for e in envs:
        assert e["TORCHELASTIC_RUN_ID"] == job and e["OMP_NUM_THREADS"] == omp
        assert e.get("DGLCTL_PREFETCH") == prefetch
        assert e["GLOO_SOCKET_IFNAME"] == "lo"  # 127.0.0.1 and .2: the loopback interface
        assert e["LOCAL_WORLD_SIZE"] == "2" and e["GROUP_RANK"] == str(int(e["RANK"]) // 2)
        assert e["nodes"] == 400
    assert leftovers(job) == ([], [])


@pytest.mark.multiprocess
def test_uncaught_exception_is_the_root_cause(parts, home, full_local_cluster, capsys):
    code, out, err = run(["launch", "--cluster", str(full_local_cluster), "--part-config",
                          str(parts[2]), SCRIPT, "crash"], capsys)
    assert code == 1
    assert re.search(r"\[m0 trainer 1\] \(trainer-0-1, .*exited with code 1", err), err
    assert "uncaught exception: ValueError: rank 1 found a bad batch (" in err
    assert re.search(r"dgl_style\.py:\d+\)", err), err
    job = list_jobs()[-1]
    assert job.result["exception"] == "ValueError: rank 1 found a bad batch"
    assert leftovers(job.job_id) == ([], [])


@pytest.mark.multiprocess
def test_detach_json_gives_the_job_id(parts, home, full_local_cluster, capsys):
    code, out, err = run(["launch", "--cluster", str(full_local_cluster), "--part-config",
                          str(parts[2]), "--detach", "--json", SCRIPT, "env"], capsys)
    assert code == 0, err
    info = json.loads(out)
    try:
        assert info["state"] == "running" and info["job"] == list_jobs()[-1].job_id
        assert info["hosts"] == ["m0", "m1"]
    finally:
        main(["stop", info["job"]])
    assert leftovers(info["job"]) == ([], [])
