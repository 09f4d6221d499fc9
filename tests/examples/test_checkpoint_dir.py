"""Where the GraphSAGE example's ``--checkpoint-dir`` lands, launched with ``dglctl launch``
on the local cluster: a relative folder is each host's copy of the project, so on one host it
survives the next launch and the job resumes from it, and on two hosts (the default cluster)
it is refused before the first step, every trainer told why, without spending a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from partitioner import partition_graph
from partitioner.generate import generate_graph
from testing.ports import free_port_range
from testing.procs import leftovers
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess
REPO = Path(__file__).parents[2]
RUN_TIMEOUT = 30 * TIMEOUT


@pytest.fixture(scope="module")
def part_configs(tmp_path_factory) -> dict[int, Path]:
    """1- and 2-part partitions of one small graph named 'g'."""
    root = tmp_path_factory.mktemp("ckdir")
    g = generate_graph(2000, avg_degree=8, seed=1)
    for n in (1, 2):
        partition_graph(g, "g", n, root / f"p{n}")
    return {n: root / f"p{n}" / "g.json" for n in (1, 2)}


def _cluster(tmp_path: Path, hosts: int) -> Path:
    """configs/local.yaml (2 trainers and 1 sampler each per host) on its first ``hosts``
    hosts, with a private workspace and free ports."""
    data = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    data["hosts"] = data["hosts"][:hosts]
    addresses = [h["address"] for h in data["hosts"]]
    data.update(workspace=str(tmp_path / "ws"), port_base=free_port_range(addresses, 4))
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _launch(tmp_path: Path, cluster: Path, part_config: Path, *options: str,
            epochs: int = 1) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "dglctl", "launch", *options, "--cluster", str(cluster),
            "--part-config", str(part_config), str(REPO / "examples" / "train_dist.py"),
            "--graph-name", "g", "--num-epochs", str(epochs), "--batch-size", "100",
            "--fan-out", "5,5", "--checkpoint-dir", "ck", "--checkpoint-every", "3"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO),
                                             "DGLCTL_HOME": str(tmp_path / "home")})


def _last_job(tmp_path: Path) -> dict:
    records = sorted((tmp_path / "home" / "jobs").glob("*.json"), key=os.path.getmtime)
    return json.loads(records[-1].read_text())


def test_a_relative_checkpoint_dir_on_one_host_survives_the_next_launch(tmp_path,
                                                                        part_configs):
    cluster = _cluster(tmp_path, 1)
    first = _launch(tmp_path, cluster, part_configs[1])
    assert first.returncode == 0, first.stderr[-3000:]
    assert "training from step 0" in first.stdout, first.stdout[-3000:]
    copy = next(p for p in (tmp_path / "ws" / "m0" / "work").iterdir() if p.is_dir())
    saved = sorted(p.name for p in (copy / "ck").iterdir() if p.name.startswith("step-"))
    assert saved, list((copy / "ck").iterdir())
    # One more epoch: the second launch resumes where the first one's checkpoint is.
    second = _launch(tmp_path, cluster, part_configs[1], epochs=2)
    assert second.returncode == 0, second.stderr[-3000:]
    step = int(saved[-1].split("-")[1])
    assert f"resumed from checkpoint step {step} " in second.stdout, second.stdout[-3000:]
    assert leftovers(_last_job(tmp_path)["job_id"]) == ([], [])


def test_a_checkpoint_dir_not_every_host_sees_is_refused_before_the_first_step(
        tmp_path, part_configs):
    cluster = _cluster(tmp_path, 2)
    run = _launch(tmp_path, cluster, part_configs[2], "--max-restarts", "2")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    said = run.stdout + run.stderr
    assert "CheckpointError: checkpoint directory ck: trainer " in said, said[-4000:]
    assert "not one folder that every trainer's host shares" in said
    assert "relative path" in said and "absolute path on a shared file system" in said
    assert "not restarted" in said and "2 restart(s) left unused" in said, said[-3000:]
    assert "FileNotFoundError" not in said
    job = _last_job(tmp_path)
    assert len(job["attempts"]) == 1, job["attempts"]
    assert job["state"] == "failed"
    for host in ("m0", "m1"):
        left = [p for p in (tmp_path / "ws" / host / "work").rglob("*")
                if p.name.startswith((".step-", "step-", ".visible-"))]
        assert left == [], left
    assert leftovers(job["job_id"]) == ([], [])
