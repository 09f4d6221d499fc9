"""``dglctl check`` (the launch preflight alone, as a report) on the local cluster and over
SSH, and shell completion of job ids through click's real completion protocol."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete

from dglctl.cli import cli
from dglctl.jobs.manifest import HostRecord, JobManifest
from testing.cli import run_cli as run
from testing.clusters import ssh_cluster
from testing.sshd import ADDRESSES
from testing.timeouts import TIMEOUT
from tests.dglctl import SCRIPTS

REPO = Path(__file__).resolve().parents[2]
TRAINER = str(SCRIPTS / "trainer.py")


def port_base(cluster_path: Path) -> int:
    from dglctl.config import load_cluster_config

    return load_cluster_config(cluster_path).port_base


@pytest.mark.multiprocess
def test_check_passes_on_the_local_cluster(parts, home, local_cluster, capsys):
    code, out, err = run(["check", "--cluster", str(local_cluster), "--part-config",
                          str(parts[2])], capsys)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"cluster {local_cluster}: 2 host(s)")
    assert lines[-1] == "check: 2 host(s) OK: a launch would pass preflight"
    assert "FAIL" not in out and out.count("OK    reachable") == 2
    assert "still to copy" in out
    code, out, _ = run(["check", "--cluster", str(local_cluster), "--part-config",
                        str(parts[2]), "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["problems"] == []
    assert [h["name"] for h in report["hosts"]] == ["m0", "m1"]
    for h in report["hosts"]:
        assert h["reachable"] and h["ok"] and h["workspace_writable"] and h["cpus"] >= 1
        assert h["python"] == h["python_here"] and h["dglctl"] == h["dglctl_here"]
        assert 0 < h["bytes_needed"] == h["bytes_to_copy"], "nothing was copied yet"
        assert h["disk_free"] > h["bytes_needed"]
    # Other programs on this machine may hold ports of the range: launch, and check, move on.
    base, chosen = port_base(local_cluster), report["ports"]["base"]
    assert report["ports"] == {
        "configured_base": base, "explicit": False, "searched": [base, base + 200],
        "servers_per_host": 1, "base": chosen, "master_port": chosen + 1,
        "moved": chosen != base}


@pytest.mark.multiprocess
def test_without_cluster_the_default_local_cluster_is_checked(home, local_cluster, capsys,
                                                              monkeypatch):
    from dglctl.commands import launch

    monkeypatch.setattr(launch, "DEFAULT_CLUSTER", local_cluster)  # check's default too
    code, out, err = run(["check"], capsys)
    assert code == 0, out + err
    assert out.startswith(f"cluster {local_cluster}: 2 host(s)")
    assert "shards" not in out, "no partition given: no shard sizes"


@pytest.mark.multiprocess
def test_a_busy_port_moves_the_block_unless_the_base_is_explicit(parts, home, local_cluster,
                                                                  capsys):
    base = port_base(local_cluster)
    with socket.socket() as held:
        held.bind((ADDRESSES[1], base))  # m1's first server port
        held.listen()
        code, out, _ = run(["check", "--cluster", str(local_cluster), "--json"], capsys)
        report = json.loads(out)
        moved = report["ports"]["base"]
        assert code == 0 and report["ports"]["moved"] and moved >= base + 2
        assert base in report["hosts"][1]["ports_busy"]
        assert base not in report["hosts"][0]["ports_busy"]
        code, out, err = run(["check", "--cluster", str(local_cluster)], capsys)
        assert code == 0, out + err
        assert f"ports {base}.. are in use; launch would use " in out
        assert f" busy ({base}" in out

        explicit = ["--cluster", str(local_cluster), "--port-base", str(base)]
        code, out, _ = run(["check", *explicit, "--json"], capsys)
        report = json.loads(out)
        problem = f"host m1: port(s) {base} in use"
        assert code == 1 and not report["ok"] and report["problems"] == [problem]
        assert report["hosts"][1]["problems"] == [problem] and report["hosts"][0]["ok"]
        code, out, _ = run(["check", *explicit], capsys)
        assert code == 1 and f"  FAIL  {problem}" in out
        assert out.splitlines()[-1] == ("check: 1 problem(s) on 1 of 2 host(s): a launch "
                                        "would stop at preflight")
        # launch's preflight names the same problem, in the same words.
        code, _, err = run(["launch", *explicit, "--part-config", str(parts[2]), TRAINER,
                            "ok"], capsys)
        assert code == 2 and "preflight found 1 problem(s)" in err and problem in err


@pytest.mark.multiprocess
def test_a_data_address_not_of_the_host_is_named(home, local_cluster, tmp_path, capsys):
    """m1's data address (TEST-NET-2, never assigned here) cannot be listened on: check and
    launch name the host, the address and the host's own addresses, not 'ports busy'."""
    import yaml

    data = yaml.safe_load(local_cluster.read_text())
    data["hosts"] = [{"name": "m1", "address": "127.0.0.2", "data_address": "198.51.100.123"}]
    local_cluster.write_text(yaml.safe_dump(data))
    code, out, err = run(["check", "--cluster", str(local_cluster)], capsys)
    assert code == 1, err
    assert "FAIL  host m1: cannot listen on its data address 198.51.100.123" in out, out
    assert "127.0.0.1 (lo)" in out and "busy" not in err
    from partitioner import partition_graph
    from testing.graphs import community_graph

    partition_graph(community_graph(n=200), "g", 1, tmp_path / "p1")
    code, out, err = run(["launch", "--cluster", str(local_cluster), "--part-config",
                          str(tmp_path / "p1" / "g.json"), TRAINER, "ok"], capsys)
    assert code != 0
    assert "host m1: cannot listen on its data address 198.51.100.123" in err, err
    assert "set data_address for it in the cluster YAML" in err


@pytest.mark.ssh
def test_an_unreachable_host_is_its_own_problem(sshd, parts, home, tmp_path, capsys):  # noqa: F811
    hosts = [{"name": "h0", "address": "no-such-host.invalid", "data_address": ADDRESSES[0]},
             {"name": "h1", "address": ADDRESSES[1]}, {"name": "h2", "address": ADDRESSES[2]}]
    for i, h in enumerate(hosts):
        h["workspace"] = str(tmp_path / f"ws-h{i}")
    cluster = ssh_cluster(tmp_path / "c.yaml", sshd, hosts=hosts)
    args = ["--cluster", str(cluster), "--part-config", str(parts[3])]
    code, out, _ = run(["check", *args, "--json"], capsys)
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    h0, h1, h2 = report["hosts"]
    assert not h0["reachable"] and "host h0" in h0["error"]
    assert "no-such-host.invalid" in h0["error"] and h0["problems"] == [h0["error"]]
    for h in (h1, h2):
        assert h["reachable"] and h["ok"] and h["bytes_to_copy"] == h["bytes_needed"] > 0
    assert report["problems"] == [h0["error"]]
    code, out, _ = run(["check", *args], capsys)
    assert code == 1 and f"  FAIL  {h0['error'].splitlines()[0]}" in out
    assert out.count("OK    reachable") == 2 and "Traceback" not in out
    assert out.splitlines()[-1].startswith("check: 1 problem(s) on 1 of 3 host(s)")
    code, _, err = run(["launch", *args, TRAINER, "ok"], capsys)
    assert code == 1 and h0["error"] in err, "launch stops on the same error"


def _manifest(job_id: str, created: float) -> None:
    JobManifest(job_id=job_id, token="t", cluster={"path": "c.yaml", "transport": "local"},
                script="train.py", args=[], part_config="g.json", ip_config="ip_config.txt",
                hosts=[HostRecord("m0", "127.0.0.1", "127.0.0.1", "/w")],
                created=created).save()


@pytest.mark.multiprocess
@pytest.mark.parametrize("shell, comp_cword, expected", [
    # What each shell's script (from _DGLCTL_COMPLETE=SHELL_source) sends, and reads back.
    ("bash", "2", ["plain,1202-bbbbbb", "plain,1201-aaaaaa"]),
    ("zsh", "2", ["plain", "1202-bbbbbb", "starting, train.py",
                  "plain", "1201-aaaaaa", "starting, train.py"]),  # with each job's state
    ("fish", "12", ["plain,1202-bbbbbb\tstarting, train.py",
                    "plain,1201-aaaaaa\tstarting, train.py"]),
])
def test_job_ids_complete_through_the_shell_protocol(home, shell, comp_cword, expected):
    _manifest("1201-aaaaaa", 100.0)
    _manifest("1202-bbbbbb", 200.0)
    _manifest("0101-cccccc", 300.0)  # newest, but not what was typed
    env = {**os.environ, "DGLCTL_HOME": str(home), "_DGLCTL_COMPLETE": f"{shell}_complete",
           "COMP_WORDS": "dglctl status 12", "COMP_CWORD": comp_cword}
    done = subprocess.run([sys.executable, "-m", "dglctl"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3 * TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected


@pytest.mark.unit
@pytest.mark.parametrize("command", ["status", "stop", "logs"])
def test_every_job_argument_completes(home, command):
    _manifest("1201-aaaaaa", 100.0)
    _manifest("1202-bbbbbb", 200.0)
    complete = ShellComplete(cli, {}, "dglctl", "_DGLCTL_COMPLETE")
    items = complete.get_completions([command], "1")
    assert [i.value for i in items] == ["1202-bbbbbb", "1201-aaaaaa"]
    assert items[0].help == "starting, train.py"
    assert complete.get_completions([command], "9") == []
