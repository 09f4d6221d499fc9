"""dglctl launch over real SSH: an OpenSSH server on 127.0.0.1-3 that the tests start."""

from __future__ import annotations

import sys

import pytest
import yaml

from dglctl.jobs.manifest import list_jobs
from testing.cli import run_cli as run
from testing.clusters import ssh_cluster
from testing.procs import leftovers
from testing.sshd import ADDRESSES
from testing.wait import wait_until
from tests.dglctl import SCRIPTS

pytestmark = pytest.mark.ssh
TRAINER = str(SCRIPTS / "trainer.py")


def test_three_host_launch(sshd, parts, home, tmp_path, capsys):
    cluster = ssh_cluster(tmp_path / "c.yaml", sshd)
    code, out, err = run(["launch", TRAINER, "--cluster", str(cluster), "--part-config",
                          str(parts[3]), "--", "ok"], capsys)
    assert code == 0, err
    for i in range(3):
        assert f"[h{i} trainer {i}] rank {i}/3 pulled (400, 5)" in out
    job = list_jobs()[-1]
    assert job.state == "succeeded"
    assert leftovers(job.job_id) == ([], [])
    # A second launch finds the shards in place and copies nothing.
    code, out, err = run(["launch", TRAINER, "--cluster", str(cluster), "--part-config",
                          str(parts[3]), "--", "ok"], capsys)
    assert code == 0 and err.count("up to date") == 3


def test_hosts_sharing_one_workspace(sshd, parts, home, tmp_path, capsys):
    """Three hosts whose workspace is one folder, as an NFS home is on many clusters: each
    copies into it at once, a job runs and a detached one stops; each host's files keep
    their own names (logs, exit statuses, its record of the job)."""
    import json

    from testing.timeouts import TIMEOUT

    cluster = ssh_cluster(tmp_path / "c.yaml", sshd)
    data = yaml.safe_load(cluster.read_text())
    for h in data["hosts"]:
        h["workspace"] = str(tmp_path / "nfs-home")
    cluster.write_text(yaml.safe_dump(data))
    code, out, err = run(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]),
                          TRAINER, "ok"], capsys)
    assert code == 0, err
    assert out.count("] done") == 3
    job = list_jobs()[-1].job_id
    folder = tmp_path / "nfs-home" / "jobs" / job
    assert sorted(p.name for p in folder.glob("manifest.*.json")) == [
        "manifest.h0.json", "manifest.h1.json", "manifest.h2.json"]
    assert len(list(folder.glob("trainer-*.rc"))) == 3
    assert leftovers(job) == ([], [])
    code, out, err = run(["launch", "--cluster", str(cluster), "--part-config", str(parts[3]),
                          "--detach", "--json", TRAINER, "sleep"], capsys)
    assert code == 0, err
    job = json.loads(out)["job"]
    try:
        logs = lambda: list((tmp_path / "nfs-home" / "jobs" / job).glob("trainer-*.log"))  # noqa: E731
        wait_until(lambda: len(logs()) == 3 and all(b"sleeping" in p.read_bytes()
                                                    for p in logs()),
                   "3 trainers sleeping", timeout=10 * TIMEOUT, interval=0.1)
        code, out, _ = run(["status", job, "--json"], capsys)
        states = [p["state"] for p in json.loads(out)["processes"]]
        assert code == 0 and states == ["running"] * 6, states
    finally:
        code, out, err = run(["stop", job], capsys)
    assert code == 0, err
    assert leftovers(job) == ([], [])


def test_ssh_failures_are_clear(sshd, parts, home, tmp_path, capsys):
    def launch(**changes):
        cluster = ssh_cluster(tmp_path / "c.yaml", sshd, **changes)
        return run(["launch", TRAINER, "--cluster", str(cluster), "--part-config",
                    str(parts[3]), "--", "ok"], capsys)

    hosts = [{"name": "h0", "address": "no-such-host.invalid", "data_address": ADDRESSES[0]},
             {"name": "h1", "address": ADDRESSES[1]}, {"name": "h2", "address": ADDRESSES[2]}]
    code, _, err = launch(hosts=hosts)
    assert code != 0 and "host h0" in err and "no-such-host.invalid" in err
    other_key = tmp_path / "other_key"
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)],
                   check=True)
    code, _, err = launch(ssh_key=str(other_key))
    assert code != 0 and "SSH authentication failed" in err
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    code, _, err = launch(ssh_known_hosts=str(empty))
    assert code != 0 and "is not in" in err and "strict_host_keys" in err
    code, _, err = launch(python="/nonexistent/bin/python3")
    assert code != 0 and "/nonexistent/bin/python3" in err and "install the same dglctl" in err
    for e in (err,):
        assert "Traceback" not in e


def test_python_under_home(sshd, parts, home, tmp_path, capsys):
    """``python: ~/...`` (as configs/cluster.example.yaml writes it): every remote call and
    every started process finds the interpreter under the remote user's home."""
    import os

    under_home = "~/" + os.path.relpath(sys.executable, os.path.expanduser("~"))
    cluster = ssh_cluster(tmp_path / "c.yaml", sshd, python=under_home)
    code, out, err = run(["launch", TRAINER, "--cluster", str(cluster), "--part-config",
                          str(parts[3]), "--", "ok"], capsys)
    assert code == 0, err
    for i in range(3):
        assert f"[h{i} trainer {i}] rank {i}/3 pulled (400, 5)" in out
    assert leftovers(list_jobs()[-1].job_id) == ([], [])


def test_remote_line_expands_only_a_leading_tilde():
    from dglctl.hosts.transport import remote_line

    assert remote_line(["~/v x/bin/python", "-c", "~/a b"]) == "~/'v x/bin/python' -c '~/a b'"
    assert remote_line(["/usr/bin/python3", "~/x"]) == "/usr/bin/python3 '~/x'"
    assert remote_line(["~user/python"]) == "'~user/python'"


def test_big_files_copy_through_ssh_atomically(sshd, tmp_path):
    import os

    from dglctl.config import load_cluster_config
    from dglctl.hosts.transport import OPENSSH_MIN_BYTES, SSHTransport

    cluster = load_cluster_config(ssh_cluster(tmp_path / "c.yaml", sshd))
    t = SSHTransport(cluster.hosts[1], cluster)
    t.workspace = str(tmp_path / "ws")
    data = os.urandom(OPENSSH_MIN_BYTES + 12345)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    t.put(src, "deep/er/big.bin")
    t.put_bytes(b"small", "deep/small.txt", mode=0o600)
    t.close()
    assert (tmp_path / "ws" / "deep" / "er" / "big.bin").read_bytes() == data
    assert (tmp_path / "ws" / "deep" / "small.txt").stat().st_mode & 0o777 == 0o600
    assert not list((tmp_path / "ws").rglob(".*tmp*")), "no temporary files left"


@pytest.mark.parametrize("size", ["small", "big"])
def test_a_file_that_grows_while_copied_arrives_as_it_was_read(sshd, tmp_path, size):
    """Over SFTP (small) and through the system ssh (big), a file appended to during the copy
    arrives as a whole prefix of itself, and ``put`` returns the size and checksum of exactly
    those bytes (what the launcher then verifies on the host)."""
    import threading
    import time

    import xxhash

    from dglctl.config import load_cluster_config
    from dglctl.hosts.transport import OPENSSH_MIN_BYTES, SSHTransport

    cluster = load_cluster_config(ssh_cluster(tmp_path / "c.yaml", sshd))
    t = SSHTransport(cluster.hosts[1], cluster)
    t.workspace = str(tmp_path / "ws")
    src = tmp_path / "grows.bin"
    src.write_bytes(b"s" * (OPENSSH_MIN_BYTES if size == "big" else 1000))
    stop = threading.Event()

    def append() -> None:
        while not stop.is_set():
            with open(src, "ab") as f:
                f.write(b"x" * 4096)
            time.sleep(0.001)  # a log's pace: the copy reaches the end it has at that moment

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        sent = t.put(src, "grows.bin")
    finally:
        stop.set()
        writer.join()
        t.close()
    arrived = (tmp_path / "ws" / "grows.bin").read_bytes()
    assert src.read_bytes().startswith(arrived)
    assert sent.size == len(arrived) and sent.xxh3_128 == xxhash.xxh3_128_hexdigest(arrived)


def test_private_files_are_never_readable_while_written(sshd, tmp_path, monkeypatch):
    """A file written with a mode (the job token's env file: 0600) has that mode before its
    first byte: over SFTP the temporary file is born with it; a big file goes through the
    system ssh into a folder only its owner can enter, and is renamed out once it has its
    mode. A source named ``-...`` is read here, never named to ssh."""
    import os
    import shlex
    import subprocess
    from pathlib import Path

    import paramiko

    from dglctl.config import load_cluster_config
    from dglctl.hosts import openssh, transport

    cluster = load_cluster_config(ssh_cluster(tmp_path / "c.yaml", sshd))
    ws = tmp_path / "ws"
    t = transport.SSHTransport(cluster.hosts[1], cluster)
    t.workspace = str(ws)
    modes: list[int] = []  # the mode of each file in the workspace at each SFTP write
    write = paramiko.sftp_file.SFTPFile.write

    def watched_write(self, data):
        modes.extend(p.stat().st_mode & 0o777 for p in ws.rglob("*") if p.is_file())
        return write(self, data)

    folders: list[int] = []  # the mode of the folder ssh writes into
    popen = subprocess.Popen

    def watched_popen(argv, **kwargs):
        dest = shlex.split(argv[-1])[-1]  # "cat > DEST"
        folders.append(Path(dest).parent.stat().st_mode & 0o777)
        return popen(argv, **kwargs)

    monkeypatch.setattr(paramiko.sftp_file.SFTPFile, "write", watched_write)
    monkeypatch.setattr(openssh.subprocess, "Popen", watched_popen)
    t.put_bytes(b'{"DGLCTL_TOKEN": "f00d"}', "jobs/j/server-0-0.env.json", mode=0o600)
    assert modes and set(modes) == {0o600}, [oct(m) for m in modes]
    small = tmp_path / "small.json"
    small.write_text("{}")
    modes.clear()
    t.put(small, "jobs/j/small.json", mode=0o600)
    assert modes and set(modes) == {0o600}, [oct(m) for m in modes]
    monkeypatch.chdir(tmp_path)
    data = os.urandom(transport.OPENSSH_MIN_BYTES + 1)
    Path("-big.bin").write_bytes(data)
    t.put(Path("-big.bin"), "data/g/big.bin", mode=0o600)
    t.close()
    assert folders == [0o700], [oct(m) for m in folders]
    big = ws / "data" / "g" / "big.bin"
    assert big.read_bytes() == data and big.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in ws.rglob("*")) == [
        "big.bin", "data", "g", "j", "jobs", "server-0-0.env.json", "small.json"]
