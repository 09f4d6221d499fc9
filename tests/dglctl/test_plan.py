"""The launch plan (pure): ranks, world size, the env contract, ports; and ``launch --dry-run``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dglctl.cli import cli, main
from dglctl.config import parse_cluster_config
from dglctl.errors import ConfigError
from dglctl.jobs.plan import (
    LaunchOptions,
    busy_ports_problem,
    choose_ports,
    host_files,
    plan_job,
    prefetch_without_core,
    preflight_ports,
)
from partitioner.format import PartConfig
from runtime.env import RuntimeEnv
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.unit
TRAINER = str(SCRIPTS / "trainer.py")
TOKEN = "f00dfeedf00dfeedf00dfeedf00dfeed"
PART = PartConfig(
    {"graph_name": "g", "num_parts": 2,
     "files": {"part0/graph/indptr.npy": {"size": 100}, "part1/graph/indptr.npy": {"size": 70},
               "part0/node_feat/0_feat.npy": {"size": 400}}}, Path("/parts/g.json"))


def cluster(**changes):
    data = {"transport": "ssh", "hosts": [{"name": "a", "address": "10.0.0.1"},
                                          {"name": "b", "address": "10.0.0.2"},
                                          {"name": "c", "address": "10.0.0.3"}],
            "servers_per_host": 2, "trainers_per_host": 3, "samplers_per_trainer": 1,
            "port_base": 31000, "timeout": 7, "env": {"OMP_NUM_THREADS": "2"}}
    data.update(changes)
    return parse_cluster_config(data, "c.yaml")


def plan(c=None, port_base=None, part=PART, args=("--epochs", "2")):
    c = c or cluster()
    opts = LaunchOptions(Path("/home/u/train.py"), tuple(args), Path("/parts/g.json"))
    n = part["num_parts"]
    return plan_job(c, opts, part_config=part, job_id="0101-abcdef", token=TOKEN,
                    workspaces=[f"/ws/{i}" for i in range(n)], pythons=["/py"] * n,
                    port_base=port_base)


def test_processes_ranks_and_world():
    p = plan()
    assert [s.name for s in p.servers] == ["server-0-0", "server-0-1", "server-1-0", "server-1-1"]
    assert [(t.name, t.rank, t.local_rank) for t in p.trainers] == [
        ("trainer-0-0", 0, 0), ("trainer-0-1", 1, 1), ("trainer-0-2", 2, 2),
        ("trainer-1-0", 3, 0), ("trainer-1-1", 4, 1), ("trainer-1-2", 5, 2)]
    assert p.world_size == 6 and len(p.hosts) == 2, "one host per part, the third is unused"
    assert [h.name for h in p.hosts] == ["a", "b"]
    t = p.trainers[4]
    assert t.host == 1 and t.host_name == "b" and t.label == "[b trainer 4]"
    assert t.argv == ("/py", "train.py", "--epochs", "2") and t.cwd == "/ws/1/work/project"  # the project's copy
    assert p.servers[0].argv == ("/py", "-m", "runtime.server")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.rank = 0


def test_trainers_are_told_the_interface_of_their_data_address():
    c = cluster()
    opts = LaunchOptions(Path("/home/u/train.py"), (), Path("/parts/g.json"))
    kw = dict(part_config=PART, job_id="0101-abcdef", token=TOKEN, workspaces=["/ws/0", "/ws/1"],
              pythons=["/py"] * 2)
    p = plan_job(c, opts, ifnames=["ib0", None], **kw)
    assert {t.env.get("GLOO_SOCKET_IFNAME") for t in p.trainers if t.host == 0} == {"ib0"}
    assert {t.env.get("NCCL_SOCKET_IFNAME") for t in p.trainers if t.host == 0} == {"ib0"}
    # Unknown on host 1: left to torch; servers use their own sockets, never these.
    assert all("GLOO_SOCKET_IFNAME" not in t.env for t in p.trainers if t.host == 1)
    assert all("GLOO_SOCKET_IFNAME" not in s.env for s in p.servers)
    # The cluster YAML's env wins.
    c = cluster(env={"GLOO_SOCKET_IFNAME": "eth9"})
    p = plan_job(c, opts, ifnames=["ib0", "ib1"], **kw)
    assert {t.env["GLOO_SOCKET_IFNAME"] for t in p.trainers} == {"eth9"}
    assert {t.env["NCCL_SOCKET_IFNAME"] for t in p.trainers} == {"ib0", "ib1"}


def test_env_contract_and_torch_variables():
    p = plan()
    t = p.trainers[4]
    assert {k: t.env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                  "MASTER_PORT")} == {
        "RANK": "4", "LOCAL_RANK": "1", "WORLD_SIZE": "6", "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "31002"}
    assert t.env["OMP_NUM_THREADS"] == "2", "the cluster's env: travels"
    env = RuntimeEnv.from_environ(t.env)
    assert (env.role, env.machine_id, env.num_servers, env.num_trainers, env.num_samplers,
            env.timeout, env.token) == ("trainer", 1, 2, 3, 1, 7.0, TOKEN)
    assert env.part_config == "/ws/1/data/g/g.json"
    assert env.ip_config == "/ws/1/jobs/0101-abcdef/ip_config.txt"
    s = RuntimeEnv.from_environ(p.servers[3].env)
    assert (s.role, s.machine_id, s.server_id) == ("server", 1, 1)
    assert "RANK" not in p.servers[3].env
    assert p.ip_config == (("10.0.0.1", 31000), ("10.0.0.2", 31000))


def test_tunables_come_from_the_cluster_env():
    p = plan(cluster(env={"DGLCTL_SHM_DIR": "/mnt/shm", "DGLCTL_LOG_LEVEL": "DEBUG",
                          "DGLCTL_ROLE": "sampler", "DGLCTL_TIMEOUT": "99"}))
    env = RuntimeEnv.from_environ(p.trainers[0].env)
    assert env.shm_dir == "/mnt/shm" and p.shm_dir == "/mnt/shm" and env.log_level == "DEBUG"
    assert env.role == "trainer" and env.timeout == 7.0, "the launcher's fields win"
    assert plan().shm_dir == "/dev/shm"
    with pytest.raises(ConfigError, match="c.yaml: env: DGLCTL_LOG_LEVEL='LOUD'"):
        plan(cluster(env={"DGLCTL_LOG_LEVEL": "LOUD"}))


def test_ports_and_files():
    p = plan(port_base=32000)
    assert [s.port for s in p.servers] == [32000, 32001, 32000, 32001]
    assert p.master_port == 32002 and p.trainers[0].port == 32002
    assert all(t.port is None for t in p.trainers[1:])
    assert p.ip_config[1] == ("10.0.0.2", 32000)
    assert host_files(PART, 0) == ("part0/graph/indptr.npy", "part0/node_feat/0_feat.npy")
    assert p.hosts[0].bytes_needed == 500 and p.hosts[1].bytes_needed == 70


def test_more_parts_than_hosts():
    with pytest.raises(ConfigError, match="4 parts but c.yaml lists 3 host"):
        plan(part=PartConfig({**PART, "num_parts": 4}, PART.path))


def test_choose_ports():
    c = cluster(servers_per_host=2)
    assert choose_ports(c, set()) == (31000, 31002)
    # A busy block is skipped: its servers' ports or its MASTER_PORT.
    assert choose_ports(c, {31001}) == (31003, 31005)
    assert choose_ports(c, {31002}) == (31003, 31005)
    assert choose_ports(c, {31001, 31004}) == (31006, 31008)
    # An explicit --port-base is taken as it is, or not at all.
    assert choose_ports(c, {31001}, explicit=True) is None
    assert choose_ports(c, {31003}, explicit=True) == (31000, 31002)
    assert choose_ports(c, set(preflight_ports(c))) is None
    assert busy_ports_problem(c, {"a": [31001, 31050], "b": []}) == "host a: port(s) 31001 in use"


def _local_cluster(path: Path, tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    out = tmp_path / "dry.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.fixture
def no_host_contact(monkeypatch):
    """Any attempt to reach a host fails the test."""
    from dglctl.hosts import transport

    def refuse(*a, **k):
        raise AssertionError("a dry run contacted a host")

    for cls in (transport.LocalTransport, transport.SSHTransport):
        monkeypatch.setattr(cls, "run", refuse)
        monkeypatch.setattr(cls, "write_file", refuse)
    monkeypatch.setattr(transport.SSHTransport, "_connect", refuse)
    # The job token is known, so the output can be searched for it (job ids use 3 bytes).
    monkeypatch.setattr("secrets.token_hex", lambda n: TOKEN if n == 16 else "ab" * n)


def test_dry_run_prints_the_plan(parts, home, full_local_cluster, no_host_contact):
    result = CliRunner().invoke(cli, ["launch", TRAINER, "--cluster", str(full_local_cluster),
                                      "--part-config", str(parts[2]), "--dry-run", "--", "ok"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    base = yaml.safe_load(full_local_cluster.read_text())["port_base"]
    assert "dry run" in out and f"servers from {base}" in out and f"MASTER_PORT {base + 1}" in out
    for label in ("[m0 server 0]", "[m1 server 0]", "[m0 trainer 0]", "[m0 trainer 1]",
                  "[m1 trainer 2]", "[m1 trainer 3]"):
        assert label in out
    assert "RANK=3" in out and "WORLD_SIZE=4" in out and "DGLCTL_ROLE=server" in out
    assert "trainer.py ok" in out
    assert TOKEN not in result.output and "DGLCTL_TOKEN" not in result.output
    assert not home.exists(), "a dry run records nothing"


def test_dry_run_json_over_ssh_hosts_that_do_not_exist(parts, home, full_local_cluster, tmp_path,
                                                       capsys, no_host_contact):
    path = _local_cluster(full_local_cluster, tmp_path, transport="ssh", hosts=[
        {"name": "far0", "address": "no-such-host.invalid", "data_address": "10.9.0.1"},
        {"name": "far1", "address": "no-such-host-2.invalid", "data_address": "10.9.0.2"}],
        env={"DGLCTL_SHM_DIR": "/mnt/shm"})
    code = main(["launch", "--cluster", str(path), "--part-config", str(parts[2]),
                 "--port-base", "40000", "--num-trainers", "1", "--dry-run", "--json", TRAINER])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    assert plan["port_base"] == 40000 and plan["master_port"] == 40001
    assert plan["master_addr"] == "10.9.0.1" and plan["world_size"] == 2
    assert plan["shm_dir"] == "/mnt/shm"
    procs = {p["name"]: p for p in plan["processes"]}
    assert set(procs) == {"server-0-0", "server-1-0", "trainer-0-0", "trainer-1-0"}
    assert procs["trainer-1-0"]["host"] == "far1" and procs["trainer-1-0"]["rank"] == 1
    assert procs["trainer-1-0"]["env"]["DGLCTL_MACHINE_ID"] == "1"
    assert procs["server-1-0"]["port"] == 40000
    assert plan["hosts"][0]["workspace"] == yaml.safe_load(path.read_text())["workspace"]
    assert TOKEN not in out and "DGLCTL_TOKEN" not in out
    assert main(["launch", "--cluster", str(path), "--part-config", str(parts[2]),
                 "--json", TRAINER]) == 2
    assert "--json goes with --dry-run or --detach" in capsys.readouterr().err


def test_dry_run_checks_its_inputs(parts, home, full_local_cluster, tmp_path, capsys,
                                   no_host_contact):
    code = main(["launch", "--cluster", str(full_local_cluster), "--part-config",
                 str(parts[3]), "--dry-run", TRAINER])
    assert code == 2 and "3 parts" in capsys.readouterr().err
    code = main(["launch", "--cluster", str(full_local_cluster),
                 "--part-config", str(parts[2]), "--dry-run", str(tmp_path / "nope.py")])
    assert code == 2 and "nope.py: no such file" in capsys.readouterr().err


def test_local_trainers_without_an_idle_core_make_their_batches_in_the_step():
    """Every host of the local transport is this machine: when the job's servers, trainers
    and sampler processes take all its cores, the trainers' prefetch thread would only take
    the step's core, so they get DGLCTL_PREFETCH=0."""
    def trainers_env(cores, **changes):
        data = {"transport": "local", "hosts": [{"name": "m0", "address": "127.0.0.1"},
                                                {"name": "m1", "address": "127.0.0.2"}],
                "servers_per_host": 1, "trainers_per_host": 1, "samplers_per_trainer": 0,
                "env": {}}
        data.update(changes)
        c = parse_cluster_config(data, "local.yaml")
        opts = LaunchOptions(Path("/home/u/train.py"), (), Path("/parts/g.json"))
        p = plan_job(c, opts, part_config=PART, job_id="0101-abcdef", token=TOKEN,
                     workspaces=["/ws/0", "/ws/1"], pythons=["/py"] * 2, cores=[cores] * 2)
        return [t.env for t in p.trainers]

    assert all(e["DGLCTL_PREFETCH"] == "0" for e in trainers_env(2))
    assert all(e["DGLCTL_PREFETCH"] == "0" for e in trainers_env(4))
    assert all("DGLCTL_PREFETCH" not in e for e in trainers_env(5)), "an idle core"
    assert all("DGLCTL_PREFETCH" not in e for e in trainers_env(None)), "cores unknown"
    assert all(e["DGLCTL_PREFETCH"] == "0" for e in trainers_env(6, samplers_per_trainer=1))
    assert all("DGLCTL_PREFETCH" not in e for e in trainers_env(7, samplers_per_trainer=1))
    assert all(e["DGLCTL_PREFETCH"] == "1"
               for e in trainers_env(2, env={"DGLCTL_PREFETCH": "1"})), "the cluster's env wins"
    assert not prefetch_without_core(cluster(samplers_per_trainer=0), 3, 1), \
        "ssh hosts are machines of their own"
