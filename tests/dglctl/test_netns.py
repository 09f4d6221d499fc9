"""Hosts with networks of their own: two network namespaces on a bridge, an sshd in each (port
22, its own host key and client key), named only by ~/.ssh/config aliases. A process on one
host sees its own loopback and its bridge address, nothing of the launcher's 127.0.0.x, so
whatever binds, advertises or connects to the wrong address fails here even when it works on
loopback: the servers, the samplers, the DDP rendezvous (MASTER_ADDR) and the lease renewal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from partitioner import partition_graph
from partitioner.generate import generate_graph
from testing.netns import make_netns, netns_unavailable, ssh_hosts, unreachable_from_here
from testing.procs import environ_of, leftovers
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.ssh
REPO = Path(__file__).parents[2]
INTERNAL = ("node0-internal", "node1-internal")  # the namespaces' own names for their hosts


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """[(alias, address, namespace)] for two namespaced hosts, and the ssh config naming them."""
    why = netns_unavailable()
    if why:
        pytest.skip(f"no network namespaces here: {why}")
    net = make_netns(2, names=INTERNAL)
    root = tmp_path_factory.mktemp("netns")
    servers: list = []
    try:
        servers, cfg = ssh_hosts(net, root, INTERNAL)
        yield [(f"node{i}", a, ns) for i, (a, ns) in enumerate(zip(net.addresses, net.names,
                                                                       strict=True))], cfg
    finally:
        for s in servers:
            s.stop()
        net.remove()


@pytest.fixture(scope="module")
def graph_parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("netns-parts")
    partition_graph(generate_graph(3000, avg_degree=10, seed=1), "g", 2, root)
    return root / "g.json"


def _cluster(tmp_path: Path, machines, cfg: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(cfg), "connect_timeout": 5},
        "hosts": [{"address": alias, "workspace": str(tmp_path / f"ws-{alias}")}
                  for alias, _, _ in machines],
        "python": sys.executable, "servers_per_host": 2, "trainers_per_host": 1,
        "samplers_per_trainer": 1, "timeout": TIMEOUT}))
    return path


def test_the_example_trains_across_namespaced_hosts(machines, graph_parts, home, tmp_path,
                                                    capsys):
    hosts, cfg = machines
    cluster = _cluster(tmp_path, hosts, cfg)
    assert main(["launch", "--cluster", str(cluster), "--part-config", str(graph_parts),
                 "--dry-run", "--json", str(REPO / "examples" / "train_dist.py")]) == 0
    plan = json.loads(capsys.readouterr().out)
    # The aliases' HostNames are the addresses the servers are told to bind and advertise.
    assert [h["data_address"] for h in plan["hosts"]] == [a for _, a, _ in hosts]
    assert [a for a, _ in plan["ip_config"]] == [a for _, a, _ in hosts]
    code = main(["launch", "--cluster", str(cluster), "--part-config", str(graph_parts),
                 str(REPO / "examples" / "train_dist.py"), "--graph-name", "g",
                 "--num-epochs", "2", "--batch-size", "200", "--fan-out", "5,10",
                 "--lr", "0.01"])
    out = capsys.readouterr()
    assert code == 0, out.err
    m = re.search(r"test accuracy ([0-9.]+)", out.out)
    assert m and float(m.group(1)) > 0.4, out.out[-2000:]  # 8 classes: chance is 0.125


def _namespace_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def test_each_hosts_processes_live_in_its_namespace(machines, parts, home, tmp_path, capsys):
    hosts, cfg = machines
    cluster = _cluster(tmp_path, hosts, cfg)
    code = main(["launch", "--cluster", str(cluster), "--part-config", str(parts[2]),
                 "--detach", "--json", str(SCRIPTS / "trainer.py"), "sleep"])
    out = capsys.readouterr()
    assert code == 0, out.err
    job = json.loads(out.out)["job"]
    inodes = {os.stat(f"/run/netns/{ns}").st_ino: alias for alias, _, ns in hosts}
    try:
        # Servers, samplers and trainers: 2 + 1 + 1 per host, each with its wrapper.
        seen: dict[str, int] = {}

        def sleeping() -> bool:
            seen.clear()
            for pid in leftovers(job)[0]:
                where = inodes.get(_namespace_of(pid), "elsewhere")
                seen[where] = seen.get(where, 0) + 1
            logs = list(tmp_path.glob("ws-*/jobs/*/trainer-*.log"))
            return len(logs) == 2 and all(b"sleeping" in p.read_bytes() for p in logs)

        wait_until(sleeping, "2 trainers sleeping", timeout=10 * TIMEOUT, interval=0.1)
        assert set(seen) == {"node0", "node1"}, seen
        assert seen["node0"] == seen["node1"] >= 4, seen
        # DDP's gloo is told each host's bridge interface, not the hostname's 127.0.x.x.
        envs = [environ_of(pid) for pid in leftovers(job)[0]]
        ifnames = {e.get("GLOO_SOCKET_IFNAME") for e in envs if e.get("DGLCTL_ROLE") == "trainer"}
        assert ifnames == {"eth0"}, ifnames
    finally:
        stopped = main(["stop", job])
    err = capsys.readouterr().err
    assert stopped == 0, err
    assert leftovers(job) == ([], [])


def test_a_host_known_only_by_the_clusters_names(machines, parts, home, tmp_path, capsys):
    """inner1 is a compute node behind the login node node0, by a name only the cluster
    resolves (its HostName fails here), at an address the launcher has no route to: its
    data address is the one its SSH connection arrives at, learnt at preflight; the job runs
    (the hosts' agents see their servers listen), and its ip_config names that address."""
    with unreachable_from_here(machines[0][1][1]):
        _run_behind_the_login_node(machines, parts, tmp_path, capsys)


def _run_behind_the_login_node(machines, parts, tmp_path, capsys):
    import socket

    from dglctl.config import load_cluster_config
    from dglctl.jobs.manifest import JobManifest, list_jobs

    hosts, cfg = machines
    with pytest.raises(OSError):
        socket.gethostbyname(INTERNAL[1])  # the launcher's machine cannot resolve it
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(cfg), "connect_timeout": 5},
        "hosts": [{"address": a, "workspace": str(tmp_path / f"ws-{a}")}
                  for a in ("node0", "inner1")],
        "python": sys.executable, "servers_per_host": 1, "trainers_per_host": 1,
        "samplers_per_trainer": 0, "timeout": TIMEOUT}))
    assert [h.data_address_from_host for h in load_cluster_config(path).hosts] == [False, True]
    assert main(["launch", "--cluster", str(path), "--part-config", str(parts[2]),
                 "--dry-run", str(SCRIPTS / "trainer.py")]) == 0
    assert "inner1  inner1 (data the address its SSH connection arrives at" in \
        capsys.readouterr().out
    assert main(["launch", "--cluster", str(path), "--part-config", str(parts[2]),
                 "--dry-run", "--json", str(SCRIPTS / "trainer.py")]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [h["data_address"] for h in plan["hosts"]] == [hosts[0][1], None]
    assert main(["check", "--cluster", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [h["data_address"] for h in report["hosts"]] == [a for _, a, _ in hosts]
    code = main(["launch", "--cluster", str(path), "--part-config", str(parts[2]),
                 str(SCRIPTS / "trainer.py"), "ok"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.count("] done") == 2
    job = JobManifest.load(list_jobs()[-1].job_id)
    assert [h.data_address for h in job.hosts] == [a for _, a, _ in hosts]
    ip_config = (tmp_path / "ws-inner1" / "jobs" / job.job_id / "ip_config.txt").read_text()
    assert [line.split()[0] for line in ip_config.splitlines()] == [a for _, a, _ in hosts]
    assert leftovers(job.job_id) == ([], [])


def test_a_distributed_partition_runs_its_ranks_in_the_namespaces(machines, home, tmp_path):
    """One MPI rank per namespaced host (mpiexec here starts their daemons over each host's
    sshd, named by the ssh config's aliases; the ranks reach each other over the bridge): the
    files are one machine's for the same assignment."""
    hosts, cfg = machines
    g = generate_graph(2000, avg_degree=8, seed=2)
    npz = tmp_path / "g.npz"
    from partitioner.readers import write_npz

    write_npz(g, npz)
    assign = tmp_path / "a.npy"
    partition_graph(g, "g", 2, tmp_path / "metis", method="metis", save_assignment=assign)
    partition_graph(g, "g", 2, tmp_path / "single", assignment=assign)
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(cfg), "connect_timeout": 5},
        "hosts": [{"address": alias, "workspace": str(tmp_path / f"ws-{alias}")}
                  for alias, _, _ in hosts], "python": sys.executable}))
    proc = subprocess.run(
        [sys.executable, "-m", "dglctl", "partition", "--input", str(npz), "--num-parts", "2",
         "--out", str(tmp_path / "dist"), "--graph-name", "g", "--assignment", str(assign),
         "--distributed", "--cluster", str(cluster)], capture_output=True, text=True,
        timeout=12 * TIMEOUT, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMPI_MCA_plm_base_verbose": "5"})
    assert proc.returncode == 0, proc.stderr[-3000:]

    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                if p.is_file() and p.suffix != ".json"}

    assert files(tmp_path / "dist") == files(tmp_path / "single")
    # mpiexec started a daemon on each of the two hosts through ssh (3 daemons: its own and
    # theirs, the hosts by their aliases), and the daemons started the ranks.
    said = (tmp_path / "dist.logs" / "mpiexec.log").read_text()
    assert "plm:rsh: final template argv" in said and "/usr/bin/ssh -F " in said, said[-3000:]
    assert 'ess_base_num_procs "3"' in said and ",node[1:0-1]@0(3)" in said, said[-3000:]
