"""The GraphSAGE example (the DGL guide's script with runtime imports) trains, standalone and
on two 'machines' (real servers on 127.0.0.1/127.0.0.2, two trainer processes, gloo DDP)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from partitioner import partition_graph
from partitioner.generate import generate_graph
from runtime.rpc.ip_config import write_ip_config
from runtime.store.shm import job_files
from testing.ports import free_port_range
from testing.servers import REPO, Cluster
from testing.timeouts import IDLE_GRACE, TIMEOUT

pytestmark = pytest.mark.multiprocess
ARGS = ["--graph-name", "g", "--num-epochs", "4", "--batch-size", "200", "--fan-out", "5,10",
        "--lr", "0.01"]


@pytest.fixture(scope="module")
def graph():
    return generate_graph(3000, avg_degree=10, seed=1)


def _accuracy(out: str) -> float:
    m = re.search(r"test accuracy ([0-9.]+)", out)
    assert m, out
    return float(m.group(1))


def test_standalone(graph, tmp_path):
    partition_graph(graph, "g", 1, tmp_path / "p1")
    proc = subprocess.run([sys.executable, "examples/train_dist.py", *ARGS, "--part-config",
                           str(tmp_path / "p1" / "g.json")], cwd=REPO, capture_output=True,
                          text=True, timeout=12 * TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert "epoch 3" in proc.stdout
    assert _accuracy(proc.stdout) > 0.6  # 8 classes: chance is 0.125


def _two_machines(graph, tmp_path, env_extra=None, args=ARGS, after=None) -> list[str]:
    """The example on two machines (one server, one trainer each): each trainer's output;
    ``after(cluster)`` runs once the trainers have ended, before the servers are stopped."""
    partition_graph(graph, "g", 2, tmp_path / "p2")
    ips = ["127.0.0.1", "127.0.0.2"]
    base = free_port_range(ips, 1)
    write_ip_config(tmp_path / "ip.txt", [(ip, base) for ip in ips])
    cluster = Cluster(tmp_path / "p2" / "g.json", tmp_path / "ip.txt", ips, num_servers=1,
                      timeout=TIMEOUT, idle_grace=IDLE_GRACE)
    cluster.start_servers()
    master = free_port_range(["127.0.0.1"], 1)
    trainers = []
    try:
        for rank in range(2):
            env = cluster.env("trainer", rank)
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master), **(env_extra or {}))
            trainers.append(subprocess.Popen([sys.executable, "examples/train_dist.py", *args],
                                             cwd=REPO, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=18 * TIMEOUT) for p in trainers]
        for p, (_, err) in zip(trainers, outs, strict=True):
            assert p.returncode == 0, err
        if after is not None:
            after(cluster)
        return [out for out, _ in outs]
    finally:
        for p in trainers:
            if p.poll() is None:
                p.kill()
        cluster.stop()


def test_the_feature_cache_changes_no_loss(graph, tmp_path):
    """Copies of remote feature rows (feature_cache_gb) give the same run, bit for bit, and
    the epoch line says how many of the remote rows came from them."""
    args = [*ARGS, "--num-epochs", "4", "--no-eval"]  # ~8 steps each: warm-up in 2
    plain = _two_machines(graph, tmp_path / "plain", args=args)[0]
    checksum = re.compile(r"model checksum (\w+)")
    losses = re.compile(r"loss ([0-9.]+)")
    # With the prefetch thread (rows pulled ahead through the cache) and without (the step's
    # reads learnt all the same, and made through the cache in the step).
    for prefetch in ("1", "0"):
        cached = _two_machines(graph, tmp_path / f"cached{prefetch}",
                               {"DGLCTL_FEATURE_CACHE_GB": "0.00002",
                                "DGLCTL_PREFETCH": prefetch}, args=args)[0]
        assert checksum.search(plain).group(1) == checksum.search(cached).group(1), \
            (plain, cached)
        assert losses.findall(plain) == losses.findall(cached)
        hits = re.findall(r"feature cache hits ([0-9.]+)% of (\d+) remote rows", cached)
        assert len(hits) == 4 and float(hits[-1][0]) > 0 and int(hits[-1][1]) > 0, cached
    assert "feature cache" not in plain


def test_two_machines(graph, tmp_path):
    def servers_leave(cluster):
        for p in cluster.procs:
            # Servers leave once both trainers have gone and their idle grace is over.
            p.wait(cluster.leave_within())
        assert job_files(cluster.job_id) == []
        assert all(p.returncode is not None for p in cluster.procs)

    outs = _two_machines(graph, tmp_path, after=servers_leave)
    assert _accuracy(outs[0]) > 0.6
    assert "test accuracy" not in outs[1], "only rank 0 prints"


def test_link_prediction_auc_rises(tmp_path):
    g = generate_graph(2000, avg_degree=10, seed=2)
    partition_graph(g, "g", 1, tmp_path / "p1")
    proc = subprocess.run([sys.executable, "examples/train_dist_link.py", "--graph-name", "g",
                           "--part-config", str(tmp_path / "p1" / "g.json"), "--num-epochs", "3"],
                          cwd=REPO, capture_output=True, text=True, timeout=18 * TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    aucs = [float(x) for x in re.findall(r"val AUC ([0-9.]+)", proc.stdout)]
    assert len(aucs) == 3 and aucs[-1] > 0.65 and aucs[-1] > aucs[0], proc.stdout


def test_hetero_standalone_and_launched(tmp_path, monkeypatch):
    from dglctl.cli import main as dglctl_main

    g = generate_graph(3000, avg_degree=8, hetero=True, seed=0)
    for n in (1, 2):
        partition_graph(g, "h", n, tmp_path / f"p{n}")
    proc = subprocess.run([sys.executable, "examples/train_dist_hetero.py", "--graph-name", "h",
                           "--part-config", str(tmp_path / "p1" / "h.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=18 * TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert _accuracy(proc.stdout) > 0.6
    # The same script on the local 2-machine cluster, with sampler processes.
    monkeypatch.setenv("DGLCTL_HOME", str(tmp_path / "home"))
    import yaml

    cfg = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    cfg.update(workspace=str(tmp_path / "ws"),
               port_base=free_port_range(["127.0.0.1", "127.0.0.2"], 4))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = dglctl_main(["-q", "launch", str(REPO / "examples" / "train_dist_hetero.py"),
                        "--cluster", str(tmp_path / "c.yaml"), "--part-config",
                        str(tmp_path / "p2" / "h.json"), "--", "--graph-name", "h"])
    assert code == 0
    from dglctl.jobs import list_jobs

    job = list_jobs()[-1]
    assert job.state == "succeeded"
    assert job_files(job.job_id) == []


def test_accuracy_parity_standalone_vs_two_by_two(tmp_path, monkeypatch):
    """Same graph, seed, epochs and global batch: 2 parts x 2 trainers within 1 point of one
    process with the standalone DistGraph."""
    import yaml


    g = generate_graph(5000, avg_degree=10, seed=3)
    for n in (1, 2):
        partition_graph(g, "g", n, tmp_path / f"p{n}")
    args = ["--graph-name", "g", "--num-epochs", "8", "--fan-out", "5,10", "--lr", "0.01"]
    proc = subprocess.run([sys.executable, "examples/train_dist.py", *args, "--batch-size",
                           "400", "--part-config", str(tmp_path / "p1" / "g.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=30 * TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    single = _accuracy(proc.stdout)
    monkeypatch.setenv("DGLCTL_HOME", str(tmp_path / "home"))
    cfg = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    cfg.update(workspace=str(tmp_path / "ws"),
               port_base=free_port_range(["127.0.0.1", "127.0.0.2"], 4))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    log = tmp_path / "out.txt"
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "dglctl", "-q", "launch",
                               str(REPO / "examples" / "train_dist.py"), "--cluster",
                               str(tmp_path / "c.yaml"), "--part-config",
                               str(tmp_path / "p2" / "g.json"), "--", *args, "--batch-size",
                               "100"], stdout=f, stderr=subprocess.STDOUT, timeout=30 * TIMEOUT,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, log.read_text()
    distributed = _accuracy(log.read_text())
    assert abs(single - distributed) <= 0.01, (single, distributed)
