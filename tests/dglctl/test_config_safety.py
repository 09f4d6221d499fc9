"""What a cluster YAML or a part config may make dglctl do (issue 12, "faults and trust").

A path in either file is followed on every host: a part config's paths must stay inside its
folder, a cluster's paths must make sense for what they name (a host name is a folder name, a
workspace is absolute or under ``~``), no value holds a control character, and a cluster does
not mix loopback data addresses with real ones. Copies create their files with their final mode
before any byte is written, and never write through a file planted at the temporary name.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from dglctl.cli import main
from dglctl.config import cluster_from_ip_config, load_cluster_config, parse_cluster_config
from dglctl.errors import ConfigError
from dglctl.hosts.transport import SSHTransport
from tests.dglctl import SCRIPTS

TRAINER = str(SCRIPTS / "trainer.py")
CONFIGS = Path(__file__).parents[2] / "configs"


def _evil_partition(parts, root: Path, rel: str) -> Path:
    """A copy of a partition at ``root/.../parts`` whose config lists one more file, ``rel``,
    that exists (outside the folder) with its recorded size: only its path is wrong."""
    folder = root / "a" / "b" / "c" / "d" / "parts"
    shutil.copytree(parts.parent, folder)
    source = Path(os.path.normpath(folder / rel))
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("ssh-ed25519 AAAA attacker\n")
    path = folder / parts.name
    cfg = json.loads(path.read_text())
    cfg["files"][rel] = {"size": source.stat().st_size, "xxh3_128": "0" * 32}
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.unit
def test_dry_run_refuses_a_part_config_path_out_of_its_folder(parts, home, local_cluster,
                                                              tmp_path, capsys):
    path = _evil_partition(parts[2], tmp_path, "../../evil")
    code = main(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config", str(path),
                 "--dry-run", "--", "ok"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(path) in err and "['files'] key" in err and "'../../evil'" in err
    assert not home.exists() and not (tmp_path / "ws").exists(), "nothing was written"


@pytest.mark.multiprocess
def test_launch_copies_nothing_out_of_the_workspace(parts, home, local_cluster, tmp_path,
                                                    capsys):
    """The copy would write ``WORKSPACE/HOST/data/g/REL``: four ``..`` lead from there to
    ``tmp_path/x/authorized_keys``, beside the workspace."""
    rel = "../../../../x/authorized_keys"
    path = _evil_partition(parts[2], tmp_path, rel)
    code = main(["launch", TRAINER, "--cluster", str(local_cluster), "--part-config", str(path),
                 "--", "ok"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "['files'] key" in err and repr(rel) in err
    assert not (tmp_path / "x").exists(), "a file was written outside the workspace"


def _cluster(**top):
    data = {"transport": "ssh", "hosts": [{"name": "a", "address": "10.0.0.1"},
                                          {"name": "b", "address": "10.0.0.2"}]}
    data.update(top)
    return data


def _host(i, **fields):
    data = _cluster()
    data["hosts"][i].update(fields)
    return data


BAD = [  # (config, key named, value named)
    (_host(1, name="../evil"), "hosts[1].name", "../evil"),
    (_host(0, name="a/b"), "hosts[0].name", "a/b"),
    (_host(0, name="a b"), "hosts[0].name", "a b"),
    (_host(0, name=".."), "hosts[0].name", ".."),
    (_cluster(hosts=["::1", "::2"]), "hosts[0].name", "::1"),
    (_host(0, address="-oProxyCommand=touch /tmp/pwned"), "hosts[0].address",
     "-oProxyCommand=touch /tmp/pwned"),
    (_host(1, address="b c"), "hosts[1].address", "b c"),
    (_cluster(workspace="relative/ws"), "workspace", "relative/ws"),
    (_host(1, workspace="ws"), "hosts[1].workspace", "ws"),
    (_cluster(workspace="/tmp/ws\n"), "workspace", "/tmp/ws\n"),
    (_cluster(python="venv/bin/python"), "python", "venv/bin/python"),
    (_host(0, python="-c"), "hosts[0].python", "-c"),
    (_cluster(python="~other/bin/python"), "python", "~other/bin/python"),
    (_cluster(ssh={"key": "/k\x00"}), "ssh.key", "/k\x00"),
    (_cluster(ssh={"known_hosts": "~/.ssh/kh\r"}), "ssh.known_hosts", "~/.ssh/kh\r"),
    (_host(0, key="/x\x1b[31m"), "hosts[0].key", "/x\x1b[31m"),
    (_cluster(ssh={"user": "-oProxyCommand=x"}), "ssh.user", "-oProxyCommand=x"),
    (_host(1, user="a b"), "hosts[1].user", "a b"),
    (_cluster(env={"FOO": "x\ny"}), "env.FOO", "x\ny"),
    (_host(0, name="a\x00"), "hosts[0].name", "a\x00"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("data", "key", "value"), BAD, ids=[b[1] for b in BAD])
def test_unsafe_cluster_values_are_refused(data, key, value):
    with pytest.raises(ConfigError) as e:
        parse_cluster_config(data, "c.yaml")
    msg = e.value.message
    assert msg.startswith("c.yaml: ") and key in msg and repr(value) in msg, msg
    assert not any(ord(c) < 32 for c in msg), "the message shows control characters escaped"


@pytest.mark.unit
def test_sensible_cluster_values_stay_valid():
    for name in ("local.yaml", "cluster.example.yaml", "slurm.example.yaml"):
        load_cluster_config(CONFIGS / name)
    c = parse_cluster_config(_cluster(
        workspace="~", python="python3.11", ssh={"key": "keys/id_ed25519", "user": "deploy.bot",
                                                 "known_hosts": "/etc/ssh/known hosts"},
        hosts=[{"name": "gpu-0.a_b", "address": "10.0.0.1", "workspace": "~/w s/x",
                "python": "~/venvs/x/bin/python"},
               {"address": "10.0.0.2", "python": "/opt/venv/bin/python", "workspace": "/srv/ws"}],
        env={"NCCL_SOCKET_IFNAME": "eth0,ib0", "TAG": "run 1 / ü"}), "c.yaml")
    assert [h.name for h in c.hosts] == ["gpu-0.a_b", "10.0.0.2"]
    assert c.hosts[0].workspace == "~/w s/x" and c.hosts[1].python == "/opt/venv/bin/python"


@pytest.mark.unit
@pytest.mark.parametrize("hosts", [
    [{"name": "a", "address": "127.0.0.1"}, {"name": "b", "address": "10.0.0.2"}],
    [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.2",
                                            "data_address": "127.0.0.2"}],
    [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "localhost"}],
    [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "::1"}],
])
def test_loopback_hosts_do_not_mix_with_real_ones(hosts):
    with pytest.raises(ConfigError) as e:
        parse_cluster_config(_cluster(hosts=hosts), "c.yaml")
    msg = e.value.message
    assert msg.startswith("c.yaml: ") and "'a'" in msg and "'b'" in msg and "loopback" in msg


@pytest.mark.unit
def test_loopback_only_clusters_stay_valid(tmp_path):
    c = parse_cluster_config({"transport": "local", "hosts": ["127.0.0.1", "127.0.0.2",
                                                              "localhost"]})
    assert [h.data_address for h in c.hosts] == ["127.0.0.1", "127.0.0.2", "127.0.0.1"]
    # From an ip_config: alone, or with a --cluster file's settings.
    ip = tmp_path / "ip_config.txt"
    ip.write_text("127.0.0.1 30050\n127.0.0.2 30050\n")
    base = parse_cluster_config(_cluster(), "c.yaml")
    assert len(cluster_from_ip_config(ip, base).hosts) == 2
    ip.write_text("127.0.0.1 30050\n10.0.0.2 30050\n")
    for b in (None, base):
        with pytest.raises(ConfigError, match=r"'m0'.*loopback.*'m1'|'m1'.*'m0'"):
            cluster_from_ip_config(ip, b)


@pytest.mark.unit
def test_a_name_that_does_not_resolve_here(tmp_path):
    """Over SSH, an alias whose HostName resolves only inside the cluster is left for the
    host to tell at preflight; on the local transport, or as an explicit data_address, a
    name that does not resolve is an error naming the host."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host cn7\n  HostName cn7.cluster.invalid\n  ProxyJump login\n")
    c = parse_cluster_config({"transport": "ssh", "ssh": {"config": str(cfg)},
                              "hosts": ["10.0.0.1", "cn7"]}, "c.yaml")
    assert [h.data_address_from_host for h in c.hosts] == [False, True]
    for data in ({"transport": "local", "hosts": ["cn7.cluster.invalid"]},
                 {"transport": "ssh", "ssh": {"config": str(cfg)},
                  "hosts": [{"address": "cn7", "data_address": "cn7.cluster.invalid"}]}):
        with pytest.raises(ConfigError, match=r"c.yaml: hosts\[0\]: 'cn7.cluster.invalid' "
                                              "does not resolve to an IP address"):
            parse_cluster_config(data, "c.yaml")


@pytest.mark.unit
def test_big_copies_keep_the_file_name_off_the_command_line(monkeypatch, tmp_path):
    """A source named ``-o...`` (a relative --part-config) never reaches ssh's command line
    (this process reads it and pipes it); the host ends the options; the destination is
    quoted for the remote shell."""
    import io

    from dglctl.hosts import openssh

    cluster = parse_cluster_config(_cluster(ssh={"user": "u", "key": "/k"}), "c.yaml")
    t = SSHTransport(cluster.hosts[1], cluster)
    calls, piped = [], io.BytesIO()

    class FakePopen:
        def __init__(self, argv, **kwargs):
            calls.append(list(argv))
            self.stdin = piped
            piped.close = lambda: None

        def wait(self):
            return 0

        def poll(self):
            return 0

    resolved = t.resolved()  # ssh -G runs before Popen is replaced
    monkeypatch.setattr(openssh.shutil, "which", lambda name: "/usr/bin/ssh")
    monkeypatch.setattr(openssh.subprocess, "Popen", FakePopen)
    monkeypatch.chdir(tmp_path)
    Path("-oProxyCommand=x").write_bytes(b"payload")
    sent = openssh.pipe_file(t.host, resolved, Path("-oProxyCommand=x"), "/ws/a b/.big")
    argv = calls[-1]
    assert not any("ProxyCommand" in a for a in argv), argv
    assert argv[-3:] == ["--", "10.0.0.2", "cat > '/ws/a b/.big'"], argv
    assert argv[argv.index("-l") + 1] == "u" and argv[argv.index("-i") + 1] == "/k"
    assert piped.getvalue() == b"payload" and sent.size == 7


def _plant(kind: str, tmp: Path, outside: Path) -> None:
    """What another local user could leave at the temporary name: a link to their file."""
    outside.write_text("")
    os.chmod(outside, 0o666)
    if kind == "symlink":
        tmp.symlink_to(outside)
    else:
        os.link(outside, tmp)


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("how", ["bytes", "file"])
def test_local_copy_never_writes_through_a_planted_temporary(tmp_path, kind, how):
    from dglctl.hosts.transport import LocalTransport

    cluster = parse_cluster_config({"transport": "local", "hosts": [{"name": "m0", "address":
                                                                     "127.0.0.1"}],
                                    "workspace": str(tmp_path / "ws")}, "c.yaml")
    t = LocalTransport(cluster.hosts[0], cluster)
    dest = tmp_path / "ws" / "m0" / "jobs" / "j" / "x.env.json"
    dest.parent.mkdir(parents=True)
    outside = tmp_path / "theirs"
    _plant(kind, dest.with_name(f".{dest.name}.tmp{os.getpid()}"), outside)
    secret = b'{"DGLCTL_TOKEN": "f00d"}'
    if how == "bytes":
        t.put_bytes(secret, "jobs/j/x.env.json", mode=0o600)
    else:
        src = tmp_path / "src.json"
        src.write_bytes(secret)
        t.put(src, "jobs/j/x.env.json", mode=0o600)
    assert outside.read_bytes() == b"", "the secret went into the planted file"
    assert dest.read_bytes() == secret and not dest.is_symlink()
    assert dest.stat().st_mode & 0o777 == 0o600 and dest.stat().st_nlink == 1
