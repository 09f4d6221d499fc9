"""A login name per host, as on clusters where the login node and the compute nodes know the
same person by different names: the ~/.ssh/config aliases give each host its own user, port
and key. Two real users (made here, removed after) and two real sshd servers: each host's
processes run as its user (sshd's USER), in that user's home (the default workspace
``~/dglctl-workspace`` expands there), and commands, SFTP and the system ssh log in as the same user.

The users share root's uid (``useradd -o -u 0``) with their own names, homes and keys: the
interpreter the hosts run lives in root's private home here (pyenv under /root, mode 0700),
which another uid could not execute. What dglctl decides (which name logs in where, and
where ``~`` points) is the same; file ownership across uids is not tested."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dglctl.cli import main
from dglctl.config import load_cluster_config
from dglctl.hosts.transport import OPENSSH_MIN_BYTES
from dglctl.jobs.manifest import list_jobs
from testing.procs import environ_of, leftovers
from testing.sshd import ADDRESSES, reach, start_sshd
from testing.timeouts import TIMEOUT
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.ssh
TRAINER = str(SCRIPTS / "trainer.py")
USERS = ("dglctl-t1", "dglctl-t2")


def _drop_user(name: str) -> None:
    # Never "pkill -u": the name is uid 0, so that would mean every root process.
    if name in {p.pw_name for p in pwd.getpwall()}:
        subprocess.run(["userdel", "-r", "-f", name], capture_output=True)


def _make_user(name: str, key: Path, homes: Path) -> Path:
    """A Unix user whose authorized key is ``key``; its home."""
    _drop_user(name)  # a leftover of a run that was killed
    subprocess.run(["useradd", "-o", "-u", "0", "-g", "0", "-m", "-d", str(homes / name), "-s",
                    "/bin/sh", name], check=True, capture_output=True)
    # No password, but not locked: sshd without PAM refuses a locked ("!") account.
    subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True)
    ssh = homes / name / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    return ssh.parent


@pytest.fixture(scope="module")
def users(tmp_path_factory):
    """{name: (home, key)} for two fresh users, and two sshd servers that read their keys."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.fail("this test makes Unix users: it needs root and useradd (as CI has)")
    root = tmp_path_factory.mktemp("users")
    servers = [start_sshd(root / f"sshd{i}", home_keys=True) for i in range(2)]
    made = {}
    try:
        for name in USERS:
            key = root / f"key-{name}"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                           check=True)
            made[name] = (_make_user(name, key, root), key)
        yield made, servers
    finally:
        for name in USERS:
            _drop_user(name)
        for s in servers:
            s.stop()


def _cluster(tmp_path: Path, made, servers) -> Path:
    a, b = servers
    (k1, k2) = (made[u][1] for u in USERS)
    blocks = [("gpu0", ADDRESSES[0], a, USERS[0], k1), ("gpu1", ADDRESSES[1], b, USERS[1], k2),
              ("gpu2", ADDRESSES[2], a, "root", a.client_key)]
    cfg = tmp_path / "ssh_config"
    cfg.write_text("".join(
        f"Host {alias}\n  HostName {addr}\n  Port {s.port}\n  User {user}\n"
        f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {s.known_hosts}\n"
        for alias, addr, s, user, key in blocks))
    path = tmp_path / "c.yaml"
    # Only root's host names a workspace: the users' hosts take the default, in their homes.
    path.write_text(yaml.safe_dump({
        "transport": "ssh", "ssh": {"config": str(cfg), "connect_timeout": 5},
        "hosts": [{"address": "gpu0"}, {"address": "gpu1"},
                  {"address": "gpu2", "workspace": str(tmp_path / "ws-root")}],
        "python": sys.executable, "servers_per_host": 1, "trainers_per_host": 1,
        "samplers_per_trainer": 1, "timeout": TIMEOUT}))
    return path


def test_each_host_runs_as_its_own_user(users, parts, home, tmp_path, capsys):
    made, servers = users
    cluster = _cluster(tmp_path, made, servers)
    assert main(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]),
                 "--dry-run", "--json", TRAINER]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [plan["ssh"][h]["user"] for h in ("gpu0", "gpu1", "gpu2")] == [*USERS, "root"]

    code = main(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]), TRAINER,
                 "ok"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.count("] done") == 3
    job = list_jobs()[-1].job_id
    assert leftovers(job) == ([], [])
    # Each host's processes wrote into its own user's home (files are named by host index).
    folders = [made[u][0] / "dglctl-workspace" for u in USERS] + [tmp_path / "ws-root"]
    for i, ws in enumerate(folders):
        logs = {p.name.split("-")[1] for p in (ws / "jobs" / job).glob("*.log")}
        assert logs == {str(i)}, (ws, logs)

    # A big file goes through the system ssh: it lands in gpu1's user's home, as SFTP's did.
    reach(load_cluster_config(cluster), 1, tmp_path)
    landed = made[USERS[1]][0] / "dglctl-workspace" / "big.bin"
    assert landed.stat().st_size == OPENSSH_MIN_BYTES


def _runs_as(job: str) -> set[str]:
    """The login names (sshd's USER) the job's processes run under."""
    return {u for pid in leftovers(job)[0] if (u := environ_of(pid).get("USER"))}


def test_stop_ends_every_users_processes(users, parts, home, tmp_path, capsys):
    made, servers = users
    cluster = _cluster(tmp_path, made, servers)
    code = main(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]),
                 "--detach", "--json", TRAINER, "sleep"])
    out = capsys.readouterr()
    assert code == 0, out.err
    job = json.loads(out.out)["job"]
    try:
        wait_until(lambda: _runs_as(job) == {*USERS, "root"},
                   f"the job's processes running as {sorted({*USERS, 'root'})}",
                   timeout=10 * TIMEOUT, interval=0.1)
    finally:
        stopped = main(["stop", job])
    err = capsys.readouterr().err
    assert stopped == 0, err
    assert leftovers(job) == ([], [])
