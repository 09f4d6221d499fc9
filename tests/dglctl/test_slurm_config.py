"""The Slurm side without a Slurm: the allocation's cluster, the YAML, the options that do
not go together, the sbatch script, the srun line (tests/dglctl/test_slurm.py runs them on a
real Slurm)."""

from __future__ import annotations

import sys

import pytest

from dglctl.cli import main
from dglctl.commands.slurm import sbatch_script
from dglctl.config import FROM_HOST, parse_cluster_config
from dglctl.errors import ConfigError
from dglctl.hosts.slurm_alloc import Allocation, _count, cluster_from_allocation
from dglctl.hosts.transports import make_transport

pytestmark = pytest.mark.unit


def _alloc(**kw) -> Allocation:
    base = {"job_id": "42", "nodes": ("n1", "n2"),
            "addresses": {"n1": "127.0.0.1", "n2": "127.0.0.2"}, "tasks_per_node": None,
            "gpus_per_node": None}
    return Allocation(**{**base, **kw})


def test_slurm_counts_read_as_slurm_writes_them():
    assert _count({"X": "2(x3)"}, "X") == 2 and _count({"X": "4"}, "X") == 4
    assert _count({}, "X") is None and _count({"X": ""}, "X") is None


def test_the_allocations_nodes_are_the_hosts_in_order_at_their_node_addresses():
    c = cluster_from_allocation(_alloc(), None)
    assert c.transport == "slurm" and c.slurm_job == "42"
    assert [(h.name, h.address, h.data_address) for h in c.hosts] == [
        ("n1", "n1", "127.0.0.1"), ("n2", "n2", "127.0.0.2")]
    assert {h.python for h in c.hosts} == {sys.executable}  # no YAML: this interpreter
    assert c.trainers_per_host == 1 and c.gpus_per_host == 0


def test_tasks_and_gpus_per_node_follow_the_allocation_unless_the_yaml_sets_them():
    c = cluster_from_allocation(_alloc(tasks_per_node=3, gpus_per_node=2), None)
    assert (c.trainers_per_host, c.gpus_per_host) == (3, 2)
    c = cluster_from_allocation(_alloc(gpus_per_node=4), None)
    assert (c.trainers_per_host, c.gpus_per_host) == (4, 4)  # one trainer per GPU
    yaml_base = parse_cluster_config({"transport": "slurm", "trainers_per_host": 1,
                                      "python": "/opt/py", "workspace": "/scratch/ws",
                                      "servers_per_host": 2}, "s.yaml")
    c = cluster_from_allocation(_alloc(tasks_per_node=3), yaml_base)
    assert (c.trainers_per_host, c.servers_per_host) == (1, 2)
    assert {(h.python, h.workspace) for h in c.hosts} == {("/opt/py", "/scratch/ws")}


def test_a_node_address_only_the_nodes_resolve_is_learnt_at_preflight():
    c = cluster_from_allocation(_alloc(addresses={"n1": "127.0.0.1", "n2": "nowhere.invalid"}),
                                None)
    assert c.hosts[0].data_address == "127.0.0.1"
    assert c.hosts[1].data_address == FROM_HOST and c.hosts[1].data_address_from_host


def test_loopback_and_real_node_addresses_do_not_mix():
    with pytest.raises(ConfigError, match="loopback"):
        cluster_from_allocation(_alloc(addresses={"n1": "127.0.0.1", "n2": "10.1.2.3"}), None)


def test_a_slurm_yaml_lists_no_hosts():
    with pytest.raises(ConfigError, match="takes its hosts from the allocation"):
        parse_cluster_config({"transport": "slurm", "hosts": ["a"]}, "s.yaml")


@pytest.mark.parametrize("args, words", [
    (["--slurm", "--detach"], "--detach cannot go with --slurm"),
    (["--slurm", "--ip-config", "ip.txt"], "--slurm and --ip-config"),
])
def test_options_that_do_not_go_with_slurm(tmp_path, capsys, args, words, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    code = main(["launch", *args, "--part-config", str(tmp_path / "g.json"), "train.py"])
    assert code == 2 and words in capsys.readouterr().err


def test_slurm_with_a_yaml_of_another_transport_is_refused(tmp_path, capsys):
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("transport: ssh\nhosts: [10.0.0.1]\n")
    code = main(["launch", "--slurm", "--cluster", str(yaml_file), "--part-config",
                 str(tmp_path / "g.json"), "train.py"])
    err = capsys.readouterr().err
    assert code == 2 and "is a cluster of transport ssh" in err, err


def test_the_sbatch_script_execs_the_launch_so_its_code_is_the_jobs(tmp_path):
    text = sbatch_script(["--part-config", "p/g.json", "train.py", "--lr", "0.1 x"],
                         workdir=tmp_path / "my dir", python="/v/bin/python",
                         options={"nodes": 4, "time": "1:00:00", "account": None,
                                  "job_name": "dglctl"})
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --nodes=4" in lines and "#SBATCH --time=1:00:00" in lines
    assert not any("--account" in line for line in lines)
    assert f"cd '{tmp_path}/my dir'" in lines
    assert lines[-1] == ("exec /v/bin/python -m dglctl launch --slurm --part-config p/g.json "
                         "train.py --lr '0.1 x'")


def test_slurm_script_refuses_detach_and_a_line_break(capsys):
    assert main(["slurm-script", "--part-config", "g.json", "--detach", "t.py"]) == 2
    assert "drop --detach" in capsys.readouterr().err
    assert main(["slurm-script", "-p", "a\nb", "--part-config", "g.json", "t.py"]) == 2
    assert "#SBATCH" in capsys.readouterr().err


def test_every_command_is_a_one_node_step_of_the_job_with_all_its_resources():
    c = cluster_from_allocation(_alloc(), None)
    t = make_transport(c.hosts[1], c)
    assert t.processes_need_session
    argv = t.srun()
    assert argv[0] == "srun" and "--jobid=42" in argv and "--nodelist=n2" in argv
    assert {"--overlap", "--whole", "--nodes=1", "--ntasks=1", "--cpu-bind=none"} <= set(argv)


def test_a_distributed_partition_on_a_slurm_cluster_is_refused_before_anything(tmp_path,
                                                                               capsys):
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text("transport: slurm\n")
    src = tmp_path / "g.npz"
    src.write_bytes(b"")
    code = main(["partition", "--distributed", "--cluster", str(yaml_file), "--input", str(src),
                 "--num-parts", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "does not run its ranks as Slurm job steps" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npz", "s.yaml"]  # no logs folder
