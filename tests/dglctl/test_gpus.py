"""GPU trainers on the launcher's side: ``gpus_per_host`` / ``--num-gpus``, one trainer per
GPU by default, each trainer's device in its env (``DGLCTL_DEVICE``), and the preflight that
names a host without the GPUs asked for.

No GPU is here: the preflight tests put a stand-in ``nvidia-smi`` first on the PATH of the
real agent (it prints what ``nvidia-smi -L`` prints), the one part nothing real can play."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from dglctl.agent.protocol import PreflightReport
from dglctl.errors import ConfigError
from dglctl.jobs.preflight import gpu_problem
from runtime.env import RuntimeEnv
from runtime.errors import EnvError
from testing.cli import run_cli as run
from tests.dglctl import SCRIPTS
from tests.dglctl.test_plan import cluster, plan

TRAINER = str(SCRIPTS / "trainer.py")
H200 = "GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-aaaa-bbbb-cccc-dddddddddddd)"


@pytest.mark.unit
def test_trainers_per_host_follow_the_gpus_unless_given():
    c = cluster(gpus_per_host=4)  # the helper's YAML gives trainers_per_host: 3
    assert (c.gpus_per_host, c.trainers_per_host) == (4, 3)
    data = {"hosts": [{"address": "10.0.0.1"}], "gpus_per_host": 4}
    from dglctl.config import parse_cluster_config

    c = parse_cluster_config(data, "c.yaml")
    assert (c.gpus_per_host, c.trainers_per_host) == (4, 4), "one trainer per GPU"
    c = parse_cluster_config({"hosts": [{"address": "10.0.0.1"}]}, "c.yaml")
    assert (c.gpus_per_host, c.trainers_per_host) == (0, 1)
    assert c.with_overrides(gpus_per_host=2).trainers_per_host == 2  # --num-gpus 2
    assert c.with_overrides(gpus_per_host=2, trainers_per_host=1).trainers_per_host == 1
    assert c.with_overrides(trainers_per_host=3).with_overrides(
        gpus_per_host=2).trainers_per_host == 3, "--num-trainers is kept"
    with pytest.raises(ConfigError, match="--num-gpus must be >= 0, got -1"):
        c.with_overrides(gpus_per_host=-1)
    with pytest.raises(ConfigError, match="gpus_per_host"):
        parse_cluster_config({**data, "gpus_per_host": -2}, "c.yaml")


@pytest.mark.unit
def test_the_feature_cache_budget_reaches_the_trainers():
    p = plan(cluster(feature_cache_gb=1.5))
    assert {t.env["DGLCTL_FEATURE_CACHE_GB"] for t in p.trainers} == {"1.5"}
    assert all("DGLCTL_FEATURE_CACHE_GB" not in s.env for s in p.servers)
    assert all("DGLCTL_FEATURE_CACHE_GB" not in t.env for t in plan().trainers)
    c = cluster().with_overrides(feature_cache_gb=0.25)  # --feature-cache-gb 0.25
    assert c.feature_cache_gb == 0.25
    with pytest.raises(ConfigError, match="--feature-cache-gb must be >= 0"):
        c.with_overrides(feature_cache_gb=-1.0)
    with pytest.raises(ConfigError, match="feature_cache_gb"):
        cluster(feature_cache_gb="lots")


@pytest.mark.unit
def test_each_trainer_is_given_its_device():
    p = plan(cluster(gpus_per_host=2))  # 3 trainers per host on 2 GPUs: round robin
    devices = [RuntimeEnv.from_environ(t.env).device for t in p.trainers]
    assert devices == ["cuda:0", "cuda:1", "cuda:0"] * 2
    assert {t.env["DGLCTL_DEVICE"] for t in p.trainers} == {"cuda:0", "cuda:1"}
    assert {RuntimeEnv.from_environ(s.env).device for s in p.servers} == {"cpu"}
    assert {RuntimeEnv.from_environ(t.env).device for t in plan().trainers} == {"cpu"}
    assert all(RuntimeEnv.from_environ(t.env).shared_gpu for t in p.trainers), \
        "3 trainers on 2 GPUs: DDP keeps gloo"
    p = plan(cluster(gpus_per_host=3))
    assert not any(RuntimeEnv.from_environ(t.env).shared_gpu for t in p.trainers)
    # The local transport's hosts are this one machine: its GPUs go round by global rank.
    p = plan(cluster(transport="local", gpus_per_host=4, hosts=["127.0.0.1", "127.0.0.2"],
                     trainers_per_host=2))
    assert [t.env["DGLCTL_DEVICE"] for t in p.trainers] == [f"cuda:{r}" for r in range(4)]
    assert not any(RuntimeEnv.from_environ(t.env).shared_gpu for t in p.trainers)
    env = dict(p.trainers[0].env, DGLCTL_DEVICE="gpu0")
    with pytest.raises(EnvError, match="DGLCTL_DEVICE='gpu0': expected cpu or cuda:N"):
        RuntimeEnv.from_environ(env)


def report(gpus=None, error=None) -> PreflightReport:
    return PreflightReport(python="3", executable="py", dglctl="0", ports_busy=frozenset(),
                           disk_free=1, workspace="/ws", workspace_writable=True,
                           hostname="h", gpus=gpus, gpu_error=error)


@pytest.mark.unit
def test_the_gpu_problem_names_the_host_and_what_it_has():
    two = tuple(H200.format(i=i) for i in range(2))
    assert gpu_problem("a", 0, report(()), None) is None, "no GPU asked: none needed"
    assert gpu_problem("a", 2, report(two), None) is None
    assert gpu_problem("a", 2, report(None), None) is None, "not asked (an older agent)"
    said = gpu_problem("a", 4, report(two), None)
    assert said.startswith("host a: gpus_per_host is 4, but it has 2 GPU(s) (nvidia-smi -L: "
                           "GPU 0: NVIDIA H200") and "at most 2" in said
    said = gpu_problem("b", 1, report((), "nvidia-smi is not on its PATH"), None)
    assert said == ("host b: gpus_per_host is 1, but its GPUs could not be listed: "
                    "nvidia-smi is not on its PATH")
    # CUDA_VISIBLE_DEVICES from the cluster's env decides what the trainers see.
    assert gpu_problem("a", 1, report(two), "1") is None
    assert "names GPU 3 and it has 2" in gpu_problem("a", 1, report(two), "0,3")
    assert "leaves its trainers 1" in gpu_problem("a", 2, report(two), "1")


def fake_nvidia_smi(folder: Path, gpus: int, fail: bool = False) -> Path:
    """A ``nvidia-smi`` that lists ``gpus`` GPUs for ``-L`` (or fails as a driver mismatch)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    lines = "\n".join(H200.format(i=i) for i in range(gpus))
    body = ("echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 9"
            if fail else f"cat <<'EOF'\n{lines}\nEOF")
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.multiprocess
def test_check_and_launch_name_a_host_without_the_gpus(parts, home, full_local_cluster, tmp_path,
                                                       capsys, monkeypatch):
    path = os.environ.get("PATH", "")
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'one', 1)}:{path}")
    code, out, err = run(["check", "--cluster", str(full_local_cluster), "--num-gpus", "2"], capsys)
    assert code == 1, out + err
    assert "FAIL  host m0: gpus_per_host is 2, but it has 1 GPU(s) (nvidia-smi -L: GPU 0: " \
           "NVIDIA H200" in out, out
    code, out, err = run(["launch", "--cluster", str(full_local_cluster), "--num-gpus", "2",
                          "--part-config", str(parts[2]), TRAINER, "ok"], capsys)
    assert code == 2 and "host m1: gpus_per_host is 2, but it has 1 GPU(s)" in err, err
    code, out, _ = run(["check", "--cluster", str(full_local_cluster), "--num-gpus", "1",
                        "--json"], capsys)
    hosts = json.loads(out)["hosts"]
    assert code == 0 and [len(h["gpus"]) for h in hosts] == [1, 1], out
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bad', 1, fail=True)}:{path}")
    code, out, _ = run(["check", "--cluster", str(full_local_cluster), "--num-gpus", "1"], capsys)
    assert code == 1 and ("its GPUs could not be listed: 'nvidia-smi -L' failed: Failed to "
                          "initialize NVML: Driver/library version mismatch") in out, out
    # Without GPUs asked for, nvidia-smi is never run: a CPU cluster's check is unchanged.
    code, out, _ = run(["check", "--cluster", str(full_local_cluster), "--json"], capsys)
    assert code == 0 and [h["gpus"] for h in json.loads(out)["hosts"]] == [None, None]
