"""Launch benchmark: `dglctl launch` to the first training step, and `dglctl stop` until nothing
of the job runs, each against the same processes started and stopped without the launcher.

  1. local transport (default): a cluster file like configs/local.yaml (2 loopback hosts, one
     server and one trainer each) written to a temporary folder; the real CLI in a child process.
     Baselines in the same run: the same servers and the same first-step script started
     directly with python (launch), and the same processes ending on a plain SIGTERM (stop).
  2. ``--ssh`` (needs root and openssh-server): the same over a real sshd on 127.0.0.1-3, plus
     the copy throughput of the launcher's SFTP against `scp` of the same file (goal >= 0.80).

The first-step script does what the training example does before its first step (initialize,
DistGraph, node_split, sampler, DDP model) and one training step, then prints the wall clock.
Stop is verified: no recorded process group, no process carrying the job id in its
environment and no /dev/shm/dglctl.JOB.* file may be left.

    python -m bench.launch_bench [--hosts 2|3] [--repeat R] [--ssh]   (from the repository root)
    python -m bench.launch_bench --orphan 3 10        # the SIGKILLed-launcher figure only
    python -m bench.launch_bench --supervision 20     # the supervision CPU figure only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import cpu_fields, prepare_parts
from bench.jobs import (
    cli_env,
    free_base,
    leftover_report,
    local_cluster_file,
    ssh_cluster_file,
    start_servers,
)

FIRST_STEP = '''"""One GraphSAGE training step, set up as examples/train_dist.py does; prints
the wall clock when the step is done, then sleeps argv[1] seconds (launch benchmark)."""
import sys
import time

import torch as th
import torch.nn.functional as F

import runtime
from runtime import NID, DistDataLoader, DistGraph, NeighborSampler, node_split
from runtime.nn import SAGE

runtime.initialize()
th.distributed.init_process_group(backend="gloo")
g = DistGraph("bench")
train_nid = node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
sampler = NeighborSampler(g, [10, 25], runtime.sample_neighbors, "cpu")
loader = DistDataLoader(train_nid.numpy(), 1000, collate_fn=sampler.sample_blocks, shuffle=True)
model = SAGE(g.ndata["feat"].shape[1], 64, 8, 2, F.relu, 0.5)  # 8: the generator's classes
model = th.nn.parallel.DistributedDataParallel(model)
optimizer = th.optim.Adam(model.parameters(), lr=0.003)
blocks = next(iter(loader))
x = g.ndata["feat"][blocks[0].srcdata[NID]]
y = g.ndata["label"][blocks[-1].dstdata[NID]]
optimizer.zero_grad()
F.cross_entropy(model(blocks, x), y).backward()
optimizer.step()
print(f"FIRST_STEP {time.time():.4f}", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
'''


def write_first_step(work: Path) -> Path:
    script = work / "script" / "first_step.py"  # its folder is the job's project: keep it small
    script.parent.mkdir(exist_ok=True)
    script.write_text(FIRST_STEP)
    return script


def _first_step_time(text: str) -> float | None:
    for line in text.splitlines():
        if "FIRST_STEP " in line:
            return float(line.split("FIRST_STEP ", 1)[1].split()[0])
    return None


def launch_once(cluster_file: Path, part_config: Path, script: Path, work: Path,
                timeout: float = 600.0, prefix: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """``dglctl launch`` of the first-step script, to the end; seconds to the first step
    (the step's own clock, so log streaming adds nothing), to the launcher's exit, and the
    launcher's own steps (its "NAME done in Xs" lines). ``prefix`` goes before the command
    (``salloc -N2``: the allocation's time counts), ``env`` into its environment."""
    cmd = [*prefix, sys.executable, "-m", "dglctl", "launch", "--cluster", str(cluster_file),
           "--part-config", str(part_config), str(script)]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**cli_env(work), **(env or {})}, timeout=timeout)
    total = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"dglctl launch exited {proc.returncode}: "
                           f"{(proc.stdout + proc.stderr).strip()[-2000:]}")
    ts = _first_step_time(proc.stdout)
    if ts is None:
        raise RuntimeError(f"no FIRST_STEP line in the launch output:\n{proc.stdout[-2000:]}")
    steps = {m.group(1): float(m.group(2))
             for m in re.finditer(r"^\s+(\w+) done in ([0-9.]+)s$", proc.stderr, re.M)}
    return {"first_step_s": ts - t0, "exit_s": total, "steps": steps}


def _wait_logs(logs: list[Path], deadline: float) -> None:
    while time.time() < deadline:
        if all(p.exists() and "FIRST_STEP" in p.read_text(errors="replace") for p in logs):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the trainers did not reach their first step: {logs}")


def stop_once(cluster_file: Path, part_config: Path, script: Path, work: Path) -> dict[str, Any]:
    """Launch detached (the trainers sleep after their first step), then time `dglctl stop`
    until it returns, and check that nothing of the job is left."""
    env = cli_env(work)
    out = subprocess.run([sys.executable, "-m", "dglctl", "launch", str(script), "--cluster",
                          str(cluster_file), "--part-config", str(part_config), "--detach",
                          "--", "600"], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0 or "job " not in out.stdout:
        raise RuntimeError(f"detached launch failed: {(out.stdout + out.stderr)[-2000:]}")
    job = out.stdout.split("job ", 1)[1].split()[0]
    stop = [sys.executable, "-m", "dglctl", "stop", job]
    try:
        manifest = json.loads((work / "home" / "jobs" / f"{job}.json").read_text())
        pgids = [p["pgid"] for p in manifest["procs"]]
        _wait_logs([Path(p["log"]) for p in manifest["procs"] if p["role"] == "trainer"],
                   time.time() + 300)
    except BaseException:
        subprocess.run(stop, capture_output=True, env=env, timeout=120)  # leave nothing behind
        raise
    t0 = time.perf_counter()
    proc = subprocess.run(stop, capture_output=True, text=True, env=env, timeout=120)
    seconds = time.perf_counter() - t0
    left = leftover_report(job, pgids)
    return {"stop_s": seconds, "stop_exit_code": proc.returncode, "processes": len(pgids),
            "left": left, "clean": proc.returncode == 0 and not left}


def _supervised_job(cluster_file: Path, part_config: Path, script: Path, work: Path,
                    env: dict[str, str], sleep_s: float) -> tuple[subprocess.Popen, dict]:
    """Start a supervised ``dglctl launch`` of the first-step script (its trainers sleep
    ``sleep_s`` after the step); the launcher process and the job's manifest once every
    trainer has taken its first step. On failure the launcher is killed."""
    cfg = yaml.safe_load(cluster_file.read_text())
    jobs = work / "home" / "jobs"
    before = set(jobs.glob("*.json")) if jobs.exists() else set()
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "launch", "--cluster",
                             str(cluster_file), "--part-config", str(part_config), str(script),
                             str(sleep_s)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while time.time() < deadline:
        new = [p for p in jobs.glob("*.json") if p not in before] if jobs.exists() else []
        manifest = json.loads(new[0].read_text()) if new else {}
        logs = [Path(p["log"]) for p in manifest.get("procs", []) if p["role"] == "trainer"]
        if len(logs) == cfg["trainers_per_host"] * len(cfg["hosts"]) and all(
                "FIRST_STEP" in p.read_text(errors="replace") for p in logs):
            return proc, manifest
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    if manifest:
        subprocess.run([sys.executable, "-m", "dglctl", "stop", manifest["job_id"]],
                       capture_output=True, env=env, timeout=120)
    raise RuntimeError("the supervised job's trainers did not reach their first step")


def orphan_once(cluster_file: Path, part_config: Path, script: Path, work: Path,
                timeout: float) -> dict[str, Any]:
    """A supervised job whose launcher is SIGKILLed once every trainer has taken its first
    step: seconds from the SIGKILL until nothing of the job is left (its wrappers end it when
    the lease goes silent), against the lease's length for the cluster's ``timeout``."""
    from dglctl.agent.protocol import lease_seconds

    cfg = yaml.safe_load(cluster_file.read_text())
    cluster = work / f"cluster-timeout{timeout:g}.yaml"
    cluster.write_text(yaml.safe_dump({**cfg, "timeout": timeout}))
    env = cli_env(work)
    proc, manifest = _supervised_job(cluster, part_config, script, work, env, 600)
    job, pgids = manifest["job_id"], [p["pgid"] for p in manifest["procs"]]
    try:
        proc.kill()
        t0 = time.perf_counter()
        proc.wait()
        while (left := leftover_report(job, pgids)) and time.perf_counter() - t0 < 10 * timeout + 60:
            time.sleep(0.05)
        return {"timeout": timeout, "lease_s": lease_seconds(timeout),
                "orphan_s": time.perf_counter() - t0, "left": left}
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([sys.executable, "-m", "dglctl", "stop", job], capture_output=True,
                       env=env, timeout=120)


def _busy_seconds() -> float:
    """CPU seconds this machine has spent busy since boot (all cores; /proc/stat)."""
    fields = cpu_fields()
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _tree_seconds(pid: int) -> float:
    """CPU seconds of process ``pid``, its reaped children, and its live children."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(d.name) == pid:
            total += sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
        elif int(f[1]) == pid:
            total += (int(f[11]) + int(f[12])) / tick
    return total


def supervision_once(cluster_file: Path, part_config: Path, script: Path, work: Path,
                     seconds: float, sessions: bool) -> dict[str, Any]:
    """CPU of a supervised job's launcher (and its local agents) and of the whole machine over
    ``seconds`` of supervision once every trainer sleeps after its first step; with the
    per-host agent sessions or with an agent started per call (DGLCTL_AGENT_SESSIONS=0)."""
    env = {**cli_env(work), "DGLCTL_AGENT_SESSIONS": "1" if sessions else "0"}
    proc, manifest = _supervised_job(cluster_file, part_config, script, work, env,
                                     seconds + 120)
    job = manifest["job_id"]
    try:
        time.sleep(2.0)  # past the start-up's own work
        tree0, busy0, t0 = _tree_seconds(proc.pid), _busy_seconds(), time.perf_counter()
        time.sleep(seconds)
        tree1, busy1, dt = _tree_seconds(proc.pid), _busy_seconds(), time.perf_counter() - t0
        return {"launcher_cpu_per_min": (tree1 - tree0) * 60 / dt,
                "machine_cpu_per_min": (busy1 - busy0) * 60 / dt}
    finally:
        proc.kill()
        proc.wait()
        subprocess.run([sys.executable, "-m", "dglctl", "stop", job], capture_output=True,
                       env=env, timeout=120)


def report_supervision(cluster_file: Path, part_config: Path, work: Path,
                       args: argparse.Namespace) -> int:
    """Print supervision CPU per minute with and without agent sessions, alternating."""
    script = write_first_step(work)
    runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for i in range(args.repeat):
        for sessions in ((False, True) if i % 2 == 0 else (True, False)):
            runs[sessions].append(supervision_once(cluster_file, part_config, script, work,
                                                   args.supervision, sessions))
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    for field, what in (("launcher_cpu_per_min", "launcher and its local agents"),
                        ("machine_cpu_per_min", "whole machine (servers, trainers, agents)")):
        old, new = med[False][field], med[True][field]
        print(f"supervision CPU, {what}: an agent per call {old:.2f} s/min, one agent per "
              f"host {new:.2f} s/min; ratio {new / old:.2f}")
    return 0


def direct_once(part_config: Path, script: Path, work: Path, hosts: int, *,
                stop: bool = False) -> dict[str, Any]:
    """The baseline: the same servers and trainers started with python directly (no launcher),
    one server and one trainer per loopback host. With ``stop``: the trainers sleep after their
    first step and every process group gets a plain SIGTERM; seconds until all have exited."""
    ips = [f"127.0.0.{i + 1}" for i in range(hosts)]
    master = free_base(["127.0.0.1"], 1)
    t0 = time.time()
    servers = start_servers(part_config, 1, work, ips=ips)
    trainers = []
    try:
        for rank in range(hosts):
            env = servers.env("trainer", rank)
            env.update(RANK=str(rank), WORLD_SIZE=str(hosts), LOCAL_RANK="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master), OMP_NUM_THREADS="1",
                       PYTHONUNBUFFERED="1")
            trainers.append(subprocess.Popen(
                [sys.executable, str(script), "600" if stop else "0"], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                start_new_session=True))
        firsts = []
        for p in trainers:  # the FIRST_STEP line is each trainer's first line of output
            line = p.stdout.readline()
            if not line.startswith("FIRST_STEP"):
                raise RuntimeError(f"direct trainer printed {line!r} instead of FIRST_STEP")
            firsts.append(float(line.split()[1]))
        result: dict[str, Any] = {"first_step_s": firsts[0] - t0}
        if stop:
            procs = servers.procs + trainers
            t1 = time.perf_counter()
            for p in procs:
                os.killpg(p.pid, signal.SIGTERM)
            for p in procs:
                p.wait(60)
            result["stop_s"] = time.perf_counter() - t1
            result["left"] = leftover_report(servers.job_id, [p.pid for p in procs])
        else:
            for p in trainers:
                p.wait(120)
            result["exit_s"] = time.time() - t0
        return result
    finally:
        for p in trainers:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        servers.stop()


def measure_launch(cluster_file: Path, part_config: Path, work: Path, *, hosts: int = 2,
                   repeat: int = 3, baseline: bool = True, log=lambda _m: None) -> dict[str, Any]:
    """Launch-to-first-step and stop figures for ``cluster_file`` with the direct baselines,
    alternating launched and direct runs (medians)."""
    script = write_first_step(work)
    log("launch: first launch (copies the shards into the hosts' workspaces)")
    first = launch_once(cluster_file, part_config, script, work)
    launched, direct, steps = [], [], []
    for i in range(repeat):
        log(f"launch: dglctl launch to first step, run {i + 1}/{repeat}")
        run = launch_once(cluster_file, part_config, script, work)
        launched.append(run["first_step_s"])
        steps.append(run["steps"])
        if baseline:
            log(f"launch: same processes started directly, run {i + 1}/{repeat}")
            direct.append(direct_once(part_config, script, work, hosts)["first_step_s"])
    log("launch: dglctl stop of a detached job")
    stopped = stop_once(cluster_file, part_config, script, work)
    out: dict[str, Any] = {
        "hosts": hosts, "first_launch_s": first["first_step_s"],
        "first_launch_steps": first["steps"],
        "launch_s": statistics.median(launched), "launch_runs": launched,
        "launcher_steps": {k: statistics.median(st[k] for st in steps) for k in steps[0]},
        **stopped}
    if baseline:
        log("launch: plain SIGTERM to the directly started processes")
        plain = direct_once(part_config, script, work, hosts, stop=True)
        out.update(direct_s=statistics.median(direct), direct_runs=direct,
                   launch_ratio=out["launch_s"] / statistics.median(direct),
                   sigterm_s=plain["stop_s"], sigterm_left=plain["left"],
                   stop_ratio=stopped["stop_s"] / plain["stop_s"])
    return out


def copy_throughput(cluster_file: Path, sshd, work: Path, size_mb: int, repeat: int) -> dict:
    """The launcher's copy (a big file: piped through the system ssh, read once) vs plain scp
    of the same file to the same host, alternating."""
    from dglctl.config import load_cluster_config
    from dglctl.hosts.transport import SSHTransport
    from testing.sshd import ADDRESSES

    cluster = load_cluster_config(cluster_file)
    big = work / "copy.bin"
    big.write_bytes(os.urandom(size_mb << 20))
    t = SSHTransport(cluster.hosts[1], cluster)
    t.workspace = str(work / "ws1")
    sftp_t, scp_t = [], []
    try:
        for i in range(repeat):
            t0 = time.perf_counter()
            t.put(big, f"copy-test/sftp{i}.npy")
            sftp_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(["scp", "-q", "-P", str(sshd.port), "-i", str(sshd.client_key),
                            "-o", f"UserKnownHostsFile={sshd.known_hosts}", str(big),
                            f"root@{ADDRESSES[1]}:{work / 'ws1' / f'scp{i}.npy'}"], check=True)
            scp_t.append(time.perf_counter() - t0)
    finally:
        t.close()
    size = big.stat().st_size
    return {"bytes": size, "sftp_mbs": size / statistics.median(sftp_t) / 1e6,
            "scp_mbs": size / statistics.median(scp_t) / 1e6}


def report_orphans(cluster_file: Path, part_config: Path, work: Path,
                   args: argparse.Namespace) -> int:
    """Print the SIGKILLed-launcher figure for each timeout, ``--repeat`` times each."""
    script = write_first_step(work)
    for timeout in args.orphan or [3.0, 10.0]:
        runs = [orphan_once(cluster_file, part_config, script, work, timeout)
                for _ in range(args.repeat)]
        took = [r["orphan_s"] for r in runs]
        lease = runs[0]["lease_s"]
        left = [x for r in runs for x in r["left"]]
        state = "nothing left" if not left else "LEFT: " + ", ".join(left)
        print(f"launcher SIGKILLed, timeout {timeout:g}s (lease {lease:g}s): nothing of the job "
              f"left after {statistics.median(took):.1f}s (runs {[round(x, 1) for x in took]}; "
              f"{state}); ratio to the lease {statistics.median(took) / lease:.2f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=300_000)
    ap.add_argument("--feat-dim", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=3, choices=[2, 3])
    ap.add_argument("--ssh", action="store_true", help="over a real sshd (needs root)")
    ap.add_argument("--copy-mb", type=int, default=256)
    ap.add_argument("--orphan", type=float, nargs="*", metavar="TIMEOUT", default=None,
                    help="only the SIGKILLed-launcher figure, for each cluster timeout given "
                         "[default: 3 10]")
    ap.add_argument("--supervision", type=float, default=None, metavar="SECONDS",
                    help="only the supervision CPU figure, measured over SECONDS per run")
    args = ap.parse_args()
    from partitioner.generate import generate_graph

    work = Path(tempfile.mkdtemp(prefix="dglctl-launch-bench-"))
    part_config = prepare_parts(generate_graph(args.nodes, feat_dim=args.feat_dim, seed=0),
                                work, (args.hosts,))[args.hosts]
    sshd = None
    try:
        if args.ssh:
            from testing.sshd import start_sshd

            sshd = start_sshd(work / "sshd")
            cluster_file = ssh_cluster_file(work / "cluster.yaml", sshd, hosts=args.hosts)
            c = copy_throughput(cluster_file, sshd, work, args.copy_mb, args.repeat)
            print(f"copy {c['bytes'] / 1e6:.0f} MB: dglctl {c['sftp_mbs']:.0f} MB/s, scp "
                  f"{c['scp_mbs']:.0f} MB/s, ratio {c['sftp_mbs'] / c['scp_mbs']:.2f} "
                  "(goal >= 0.80)")
        else:
            cluster_file = local_cluster_file(work / "cluster.yaml", hosts=args.hosts)
        if args.orphan is not None:
            return report_orphans(cluster_file, part_config, work, args)
        if args.supervision is not None:
            return report_supervision(cluster_file, part_config, work, args)
        r = measure_launch(cluster_file, part_config, work, hosts=args.hosts, repeat=args.repeat,
                           log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if sshd is not None:
            sshd.stop()
    how = "ssh" if args.ssh else "local"
    print(f"first launch ({how}, copies the shards): {r['first_launch_s']:.1f}s")
    print(f"dglctl launch to first training step ({how}, {args.hosts} hosts, shards present): "
          f"{r['launch_s']:.1f}s (runs {[round(x, 1) for x in r['launch_runs']]}); started "
          f"directly {r['direct_s']:.1f}s; ratio {r['launch_ratio']:.2f}")
    state = "nothing left" if r["clean"] else "LEFT: " + ", ".join(r["left"])
    print(f"dglctl stop until nothing runs: {r['stop_s']:.1f}s ({state}); plain SIGTERM "
          f"{r['sigterm_s']:.2f}s; ratio {r['stop_ratio']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
