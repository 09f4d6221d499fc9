"""paramiko (what dglctl's SSH transport uses) against the system ssh with ControlMaster (what
Ray's command runner uses), on 3 loopback hosts of a real sshd, in one run, alternating:

  start-up:  from nothing to one finished command on every host (connections in parallel)
  commands:  N more short commands per host over the open connection / master
  copy:      one file of --copy-mb to a host: paramiko SFTP (pipelined) vs scp over the master

    python -m bench.ssh_bench [--repeat 3] [--commands 20] [--copy-mb 64]   (needs root + sshd)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testing.sshd import ADDRESSES, start_sshd


def paramiko_round(sshd, n: int, big: Path, dest: Path) -> dict[str, float]:
    import paramiko

    def connect(addr: str):
        c = paramiko.SSHClient()
        c.load_system_host_keys(str(sshd.known_hosts))
        c.connect(addr, port=sshd.port, username="root", key_filename=str(sshd.client_key),
                  look_for_keys=False, allow_agent=False)
        return c

    def run(c, cmd: str) -> None:
        chan = c.get_transport().open_session()
        chan.exec_command(cmd)
        chan.recv_exit_status()
        chan.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(3) as pool:
        clients = list(pool.map(connect, ADDRESSES))
        list(pool.map(lambda c: run(c, "true"), clients))
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda c: [run(c, "true") for _ in range(n)], clients))
    cmds = time.perf_counter() - t0
    t0 = time.perf_counter()
    sftp = clients[1].open_sftp()
    with sftp.open(str(dest), "wb") as f, open(big, "rb") as src:
        f.set_pipelined(True)
        while chunk := src.read(1 << 20):
            f.write(chunk)
    sftp.close()
    copy = time.perf_counter() - t0
    for c in clients:
        c.close()
    return {"start_s": start, "commands_s": cmds, "copy_s": copy}


def system_round(sshd, n: int, big: Path, dest: Path, work: Path) -> dict[str, float]:
    opts = ["-p", str(sshd.port), "-i", str(sshd.client_key), "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={sshd.known_hosts}", "-o", "BatchMode=yes",
            "-o", f"ControlPath={work}/cm-%h-%p", "-o", "ControlMaster=auto",
            "-o", "ControlPersist=60"]

    def run(addr: str, cmd: str) -> None:
        subprocess.run(["ssh", *opts, f"root@{addr}", cmd], check=True,
                       stdin=subprocess.DEVNULL, capture_output=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda a: run(a, "true"), ADDRESSES))
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda a: [run(a, "true") for _ in range(n)], ADDRESSES))
    cmds = time.perf_counter() - t0
    t0 = time.perf_counter()
    scp_opts = ["-P" if o == "-p" else o for o in opts]
    subprocess.run(["scp", "-q", *scp_opts, str(big), f"root@{ADDRESSES[1]}:{dest}"],
                   check=True, stdin=subprocess.DEVNULL)
    copy = time.perf_counter() - t0
    for a in ADDRESSES:  # end the masters: the next round starts from nothing again
        subprocess.run(["ssh", *opts, "-O", "exit", f"root@{a}"], capture_output=True)
    return {"start_s": start, "commands_s": cmds, "copy_s": copy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--commands", type=int, default=20)
    ap.add_argument("--copy-mb", type=int, default=64)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dglctl-ssh-bench-"))
    sshd = start_sshd(work / "sshd")
    big = work / "big.bin"
    big.write_bytes(os.urandom(args.copy_mb << 20))
    rows: dict[str, list[dict[str, float]]] = {"paramiko": [], "system ssh": []}
    try:
        for i in range(args.repeat):
            for name in (("paramiko", "system ssh") if i % 2 == 0 else ("system ssh", "paramiko")):
                dest = work / f"copy-{name.replace(' ', '')}-{i}.bin"
                r = (paramiko_round(sshd, args.commands, big, dest) if name == "paramiko"
                     else system_round(sshd, args.commands, big, dest, work))
                rows[name].append(r)
                dest.unlink()
    finally:
        sshd.stop()
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in rows.items()}
    p, s = med["paramiko"], med["system ssh"]
    print(f"3 loopback hosts, {args.repeat} rounds alternating, medians")
    print(f"start-up to one command on every host: paramiko {p['start_s']:.3f}s, system ssh "
          f"{s['start_s']:.3f}s; ratio paramiko/system {p['start_s'] / s['start_s']:.2f}")
    per = 3 * args.commands
    print(f"{per} more commands: paramiko {p['commands_s'] * 1000 / per:.1f} ms each, system ssh "
          f"(ControlMaster) {s['commands_s'] * 1000 / per:.1f} ms each; ratio "
          f"{p['commands_s'] / s['commands_s']:.2f}")
    mb = args.copy_mb * 1.048576
    print(f"copy {mb:.0f} MB: paramiko SFTP {mb / p['copy_s']:.0f} MB/s, scp over the master "
          f"{mb / s['copy_s']:.0f} MB/s; ratio {s['copy_s'] / p['copy_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
