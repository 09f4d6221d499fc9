"""SSH the way people configure it: hosts named only by ~/.ssh/config aliases (each with its
own port and key), a host behind a jump host, a host key only in a system-wide known-hosts
file; commands, SFTP and the system ssh all log in the same way. Two real OpenSSH servers on
loopback."""

from __future__ import annotations

import json
import sys

import paramiko
import pytest
import yaml

from dglctl.cli import main
from dglctl.config import load_cluster_config
from dglctl.errors import AuthFailed, ConfigError, UnknownHostKey
from dglctl.hosts.ssh_config import SYSTEM_KNOWN_HOSTS, resolve_ssh
from dglctl.hosts.transport import OPENSSH_MIN_BYTES
from dglctl.jobs.manifest import list_jobs
from testing.procs import leftovers
from testing.sshd import ADDRESSES, reach, refused, start_sshd
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.ssh
TRAINER = str(SCRIPTS / "trainer.py")


@pytest.fixture(scope="module")
def two_sshd(tmp_path_factory):
    """Two sshd servers (own ports, host keys and client keys), both on 127.0.0.1-3."""
    servers = [start_sshd(tmp_path_factory.mktemp(f"sshd{i}")) for i in range(2)]
    yield servers
    for s in servers:
        s.stop()


def _block(alias: str, address: str, server, **extra: str) -> str:
    lines = [f"Host {alias}", f"  HostName {address}", f"  Port {server.port}", "  User root",
             f"  IdentityFile {server.client_key}", "  IdentitiesOnly yes",
             f"  UserKnownHostsFile {extra.pop('known', server.known_hosts)}"]
    lines += [f"  {k} {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def _cluster(tmp_path, ssh_config, aliases) -> object:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(ssh_config), "connect_timeout": 5},
        "hosts": [{"address": a, "workspace": str(tmp_path / f"ws-{a}")} for a in aliases],
        "python": sys.executable, "servers_per_host": 1, "trainers_per_host": 1,
        "samplers_per_trainer": 0, "timeout": 5}))
    return path


def test_hosts_named_by_config_aliases_only(two_sshd, parts, home, tmp_path, capsys):
    a, b = two_sshd
    cfg = tmp_path / "ssh_config"
    # Other ports and keys per host; the YAML names neither.
    cfg.write_text(_block("gpu0", ADDRESSES[0], a) + _block("gpu1", ADDRESSES[1], b)
                   + _block("gpu2", ADDRESSES[2], a))
    cluster = _cluster(tmp_path, cfg, ["gpu0", "gpu1", "gpu2"])
    assert [h.data_address for h in load_cluster_config(cluster).hosts] == list(ADDRESSES)
    code = main(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]),
                 "--dry-run", "--json", TRAINER])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    assert plan["ssh"]["gpu1"]["port"] == str(b.port) and plan["ssh"]["gpu1"]["user"] == "root"
    assert str(b.client_key) in plan["ssh"]["gpu1"]["connect"]
    code = main(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]), TRAINER,
                 "ok"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.count("] done") == 3
    assert leftovers(list_jobs()[-1].job_id) == ([], [])
    # A big file goes through the system ssh: the same alias, port and key.
    reach(load_cluster_config(cluster), 1, tmp_path)
    assert (tmp_path / "ws-gpu1" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES


def test_include_and_match_blocks_are_applied(two_sshd, tmp_path):
    """The config as people split it: the main file Includes a folder of host files, a
    wildcard Host block gives the key and a Match block the port, as ssh applies them."""
    a, b = two_sshd
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "lab.conf").write_text(
        f"Host lab-*\n  User root\n  IdentityFile {b.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {b.known_hosts}\n"
        f"Host lab-1\n  HostName {ADDRESSES[1]}\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Include {conf_d}/*.conf\nMatch originalhost lab-*\n  Port {b.port}\n")
    r = resolve_ssh("lab-1", config=str(cfg))
    assert (r.hostname, r.port, r.identity_files) == (ADDRESSES[1], b.port, (str(b.client_key),))
    reach(load_cluster_config(_cluster(tmp_path, cfg, ["lab-1"])), 0, tmp_path)
    assert (tmp_path / "ws-lab-1" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES


def test_a_key_only_in_the_ssh_agent(two_sshd, tmp_path, monkeypatch):
    """No IdentityFile anywhere: the key is loaded in an ssh-agent (and its file removed), and
    commands (paramiko) and a big copy (system ssh) both authenticate through the agent."""
    import subprocess

    a, _ = two_sshd
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        wait_until(sock.exists, "ssh-agent's socket")
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        key = tmp_path / "agent_key"
        key.write_bytes(a.client_key.read_bytes())
        key.chmod(0o600)
        subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True)
        key.unlink()
        cfg = tmp_path / "ssh_config"
        cfg.write_text(f"Host agented\n  HostName {ADDRESSES[0]}\n  Port {a.port}\n"
                       f"  User root\n  IdentityFile {key}\n"
                       f"  UserKnownHostsFile {a.known_hosts}\n")
        c = load_cluster_config(_cluster(tmp_path, cfg, ["agented"]))
        assert resolve_ssh("agented", config=str(cfg)).identity_files == ()  # the file is gone
        reach(c, 0, tmp_path)
        assert (tmp_path / "ws-agented" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES
        # Without the agent the same host refuses: the agent did the work.
        monkeypatch.delenv("SSH_AUTH_SOCK")
        refused(c, 0, tmp_path, AuthFailed, "no key to offer .*SSH_AUTH_SOCK is unset")
    finally:
        agent.terminate()
        agent.wait(TIMEOUT)


def test_a_host_behind_a_jump_host(two_sshd, tmp_path):
    a, b = two_sshd
    cfg = tmp_path / "ssh_config"
    cfg.write_text(_block("login", ADDRESSES[0], a)
                   + _block("node7", ADDRESSES[2], b, ProxyJump="login"))
    r = resolve_ssh("node7", config=str(cfg))
    assert r.proxy_jump == ("login",) and r.port == b.port
    def through_login(t):  # node7's connection is a channel of the login host's
        assert isinstance(t._client.get_transport().sock, paramiko.Channel)
        assert len(t._hops) == 1

    reach(load_cluster_config(_cluster(tmp_path, cfg, ["node7"])), 0, tmp_path,
          through_login)  # the big file: ssh -J login
    assert (tmp_path / "ws-node7" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES


def test_a_jump_host_behind_its_own_jump_host(two_sshd, tmp_path):
    """node7's ProxyJump names login, whose own config entry jumps through bastion: the chain
    is bastion, login, node7, as ``ssh node7`` follows it (for commands and for big copies)."""
    a, b = two_sshd
    cfg = tmp_path / "ssh_config"
    cfg.write_text(_block("bastion", ADDRESSES[0], a)
                   + _block("login", ADDRESSES[1], b, ProxyJump="bastion")
                   + _block("node7", ADDRESSES[2], a, ProxyJump="login"))
    r = resolve_ssh("node7", config=str(cfg))
    assert r.proxy_jump == ("bastion", "login")
    def two_hops(t):  # login's connection runs in a channel of bastion's, node7's in login's
        assert len(t._hops) == 2
        assert isinstance(t._hops[1].get_transport().sock, paramiko.Channel)
        assert isinstance(t._client.get_transport().sock, paramiko.Channel)

    reach(load_cluster_config(_cluster(tmp_path, cfg, ["node7"])), 0, tmp_path,
          two_hops)  # the big file: ssh -J bastion,login
    assert (tmp_path / "ws-node7" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES


def test_a_proxyjump_loop_is_named(two_sshd, tmp_path):
    a, b = two_sshd
    cfg = tmp_path / "ssh_config"
    cfg.write_text(_block("x", ADDRESSES[0], a, ProxyJump="y")
                   + _block("y", ADDRESSES[1], b, ProxyJump="x"))
    with pytest.raises(ConfigError, match="form a loop: x -> y -> x"):
        resolve_ssh("x", config=str(cfg))


def test_a_host_key_only_in_a_system_wide_file(two_sshd, tmp_path):
    a, _ = two_sshd
    system = tmp_path / "ssh_known_hosts"  # stands for /etc/ssh/ssh_known_hosts
    system.write_text(a.known_hosts.read_text())
    cfg = tmp_path / "ssh_config"
    cfg.write_text(_block("m0", ADDRESSES[0], a, known="/dev/null",
                          GlobalKnownHostsFile=str(system)))
    c = load_cluster_config(_cluster(tmp_path, cfg, ["m0"]))
    reach(c, 0, tmp_path)  # commands, and the system ssh, which reads the same files
    system.write_text("")  # and without it: refused, naming the files looked in
    assert str(system) in refused(c, 0, tmp_path, UnknownHostKey, "known-hosts file").message


def test_the_system_known_hosts_are_read_by_default(tmp_path):
    empty = tmp_path / "empty_config"
    empty.write_text("")
    r = resolve_ssh("somehost", config=str(empty))
    assert set(SYSTEM_KNOWN_HOSTS) <= set(r.known_hosts)


def test_a_user_certificate_logs_in_everywhere(tmp_path):
    """An sshd that takes only certificates of its CA: the agent's commands (paramiko) and a
    big file (system ssh) both log in with KEY and KEY-cert.pub beside it, as ssh would."""
    import subprocess

    ca, key = tmp_path / "ca", tmp_path / "id_cert_user"
    for k in (ca, key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True)
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-I", "dglctl-test", "-n", "root",
                    f"{key}.pub"], check=True)
    assert (tmp_path / "id_cert_user-cert.pub").is_file()
    server = start_sshd(tmp_path / "sshd", trusted_user_ca=tmp_path / "ca.pub")
    try:
        cfg = tmp_path / "ssh_config"
        cfg.write_text(f"Host certhost\n  HostName {ADDRESSES[0]}\n  Port {server.port}\n"
                       f"  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
                       f"  UserKnownHostsFile {server.known_hosts}\n")
        c = load_cluster_config(_cluster(tmp_path, cfg, ["certhost"]))
        reach(c, 0, tmp_path)
        assert (tmp_path / "ws-certhost" / "big.bin").stat().st_size == OPENSSH_MIN_BYTES
        # Without the certificate the same key is refused: the certificate did the work.
        (tmp_path / "id_cert_user-cert.pub").unlink()
        refused(c, 0, tmp_path, AuthFailed, "authentication failed")
    finally:
        server.stop()


def _ssh_g(argv: list[str]) -> dict[str, str]:
    """What ``ssh -G`` resolves for the command ``argv`` (``ssh [options] HOST``): no server
    is asked. Each keyword once, its values joined by newlines (IdentityFile is repeated)."""
    import subprocess

    p = subprocess.run([argv[0], "-G", *argv[1:]], capture_output=True, text=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=True)
    out: dict[str, list[str]] = {}
    for line in p.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key, []).append(value)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("config_names_known_hosts", [False, True],
                         ids=["default-known-hosts", "config-known-hosts"])
def test_mpiexec_and_the_launcher_reach_a_host_the_same_way(tmp_path, config_names_known_hosts):
    """For one cluster YAML, the ssh config mpiexec starts its daemons with (``partition
    --distributed --cluster``) and the launcher's own ssh command resolve to the same
    settings (``ssh -G``, no server needed), which are the paramiko connection's: the alias's
    blocks of the user's config apply, and the YAML's known_hosts file is added to the files
    ssh reads (the config's, else ssh's defaults), not put in their place."""
    import shlex

    from dglctl.hosts.openssh import openssh_argv
    from dglctl.hosts.transport import SSHTransport
    from dglctl.jobs.mpi import cluster_command

    key = tmp_path / "id_test"
    key.write_text("")  # ssh skips an -i file that does not exist
    known = tmp_path / "yaml known%hosts"  # a space and a %-token: read literally
    config_known = tmp_path / "config_known_hosts"
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host gpu0\n  HostName 127.0.0.2\n  ProxyJump login\n  Compression yes\n"
                   "  ServerAliveInterval 7\n"
                   + (f"  UserKnownHostsFile {config_known}\n" if config_names_known_hosts
                      else "")
                   + "Host login\n  HostName 127.0.0.3\n  Port 2200\n")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "transport": "ssh",
        "ssh": {"user": "root", "port": 2222, "key": str(key), "known_hosts": str(known),
                "connect_timeout": 4, "config": str(cfg)},
        "hosts": ["gpu0", {"address": "127.0.0.3", "user": "deploy"}]}))
    cluster = load_cluster_config(path)
    logs = tmp_path / "logs"
    logs.mkdir()
    argv = cluster_command(cluster, ["--out", "x"], logs, sys.executable)
    agent = shlex.split(argv[argv.index("plm_rsh_agent") + 1])  # ssh -F FILE
    for host in cluster.hosts:
        r = SSHTransport(host, cluster).resolved()
        launcher = _ssh_g(openssh_argv(host, r))
        mpiexec = _ssh_g([*agent, host.address])
        launcher.pop("loglevel")  # the launcher's ssh is quiet (-q); mpiexec shows ssh's errors
        mpiexec.pop("loglevel")
        assert mpiexec == launcher, {k: (mpiexec.get(k), launcher.get(k))
                                     for k in {*mpiexec, *launcher}
                                     if mpiexec.get(k) != launcher.get(k)}
        # ... and both are what paramiko connects with.
        assert (launcher["hostname"], launcher["port"], launcher["user"]) == (
            r.hostname, str(r.port), r.user)
        assert launcher["identityfile"] == str(key) and launcher["identitiesonly"] == "yes"
        assert launcher["userknownhostsfile"] == " ".join(r.known_hosts)
        assert launcher["stricthostkeychecking"] == "true"
        assert (launcher["connecttimeout"], launcher["batchmode"]) == ("4", "yes")
        assert r.known_hosts[0] == str(known) and set(SYSTEM_KNOWN_HOSTS) <= set(r.known_hosts)
        if host.address == "gpu0":
            assert launcher["proxyjump"] == "login" and launcher["compression"] == "yes"
            assert launcher["serveraliveinterval"] == "7"
        if config_names_known_hosts and host.address == "gpu0":
            assert str(config_known) in r.known_hosts
        else:  # ssh's defaults for the user's files
            assert any(p.endswith("/.ssh/known_hosts") for p in r.known_hosts)
    assert [h.ssh.user for h in cluster.hosts] == ["root", "deploy"]
