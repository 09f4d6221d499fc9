"""Runtime scaling: the distributed runtime on graphs of growing size (20M and 200M directed
edges by default), each figure side by side with the smallest size and the ratio.

Issue 21 asks how the runtime behaves at 100M+ edges: server start-up (the copy into shared
memory) and memory per host, sampling and pull throughput, and the GraphSAGE example's epoch
time, against the same figures at 20M edges. For each size E (directed edges), one after the
other (at 200M edges the two machines' shared memory alone is ~10 GB), this
  1. takes a community graph of E/20 nodes, 128-wide float32 features, from the cache folder,
     or generates it there with `dglctl generate` (bench.partition_scaling.cached_graph),
  2. partitions it into --parts parts (2) with `dglctl partition --regime lean` in a child
     process, into ``CACHE/parts-<graph>-p<parts>/`` beside the graph, reused when its JSON
     config is there (the partitioner writes the folder under a temporary name and renames
     it when complete, so a config means a whole partition); its seconds and peak RSS when run,
  3. starts one graph server per machine on 127.0.0.1, 127.0.0.2, ... directly, as the
     runtime benchmarks do (bench.jobs.start_servers: the env contract, no launcher), all at once,
     and times per machine from the spawn to the moment its main server publishes its shared
     memory's manifest ("loaded": the partition is copied in) and to its first answer to a
     handshake ("start-up": it serves; it binds its port only once loaded). Memory per machine,
     read when every server answers and again after the client's measurements: the bytes of
     the job's shared-memory files of that machine (/dev/shm/dglctl.JOB.mM.*, blocks
     allocated; runtime/store/shm.py names them) and the server's VmRSS, RssShmem (the shared
     pages it touched), RssAnon (its own heap) and VmHWM from /proc/PID/status,
  4. runs a trainer-like client process on machine 0 (the env contract of the job's trainer
     0) that measures with bench.runtime_bench.measure_through_servers: two-layer neighbour
     sampling [10, 25] of 1000 random training seeds through the servers (median of --repeat
     samples), the remote pull of 10,000 random rows owned by machine 1 against a bare pyzmq
     round trip of the same bytes, and 10,000 local rows from shared memory against numpy
     fancy indexing of the same array (each pair timed in alternation),
  5. stops those servers, then runs examples/train_dist.py (GraphSAGE, 2 layers, hidden 64,
     fan-out 10,25, batch 1000 per trainer) with `dglctl launch` on a local cluster file like
     configs/local.yaml (one server and one trainer per host, no sampler processes;
     bench.jobs.local_cluster_file) for 2 epochs of --steps steps each (the example's
     --max-steps, --no-eval). The first epoch is the warm-up; seconds per step come from the
     second epoch's own time line, and the epoch time is EXTRAPOLATED: the steps of a whole
     epoch (training nodes / trainers / batch) x seconds per step. The launcher's own step
     times (copy, servers, ...) are kept too. The launch copies each host its part into a
     temporary workspace (one more copy of the partition on disk while it runs).
Every process it starts is stopped in a ``finally`` (SIGTERM included: it becomes an
exception), the job's shared memory is removed, and each job is checked for leftovers
(bench.jobs.leftover_report: processes of its groups or carrying its id, shared-memory files).

It prints per size a table of figures, then one table with every size side by side and the
ratio of each size to the first, with per-edge normalisations (shared-memory bytes per owned
edge of each machine, the server's anonymous memory per edge).

    python -m bench.runtime_scaling [--edges 20M,200M] [--parts 2] [--steps N] [--repeat R]
                                    [--out DIR] [--cache DIR] [--json] [--smoke]

--out DIR writes runtime_scaling.json (every number, the settings and the machine); --json
prints only the JSON. --smoke: one size of 200k edges, 16-wide features, 2 steps, in a
temporary folder: checks that the benchmark runs end to end
(tests/bench/test_runtime_scaling_smoke.py); its numbers mean little.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np

from bench.common import REPO, proc_status, report_sizes, run_child
from bench.partition_scaling import cached_graph, machine, parse_size
from testing.procs import end_with_this_process

AVG_DEGREE = 20.0  # directed edges per node: nodes = edges / 20
SEEDS = 1000  # training seeds of one sampling request
BATCH = 1000  # the example's batch per trainer (its default)
FAN_OUT = "10,25"
SMOKE_EDGES = "200k"
SMOKE_FEAT_DIM = 16
SMOKE_STEPS = 2
SMOKE_REPEAT = 1
# Upper bounds, not expectations: at 200M edges on the 2-core machine a server loads ~5 GB
# into shared memory, and the launch copies ~10 GB of shards before it starts its servers.
READY_TIMEOUT = 900.0
CLIENT_TIMEOUT = 1800.0
LAUNCH_TIMEOUT = 3600.0
GRACE = 60.0  # seconds between SIGTERM and SIGKILL for the launcher's own teardown
# The launcher waits max(60, 6 x the cluster's timeout) seconds for the servers to listen
# (dglctl/jobs/launcher.py, start_servers); the cluster file's timeout is raised so that this
# wait covers twice the start-up measured here.
LAUNCH_SERVER_WAIT = (60.0, 6.0)
LAUNCH_STEP = re.compile(r"^\s+(\w+) done in ([0-9.]+)s$", re.M)  # as bench.launch_bench
EPOCH = re.compile(r"epoch (\d+): loss")


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: not an Exception, so no per-size handler swallows it, and every
    ``finally`` on the way out stops what it started."""


def log(msg: str) -> None:
    """A progress line on stderr (stdout holds the tables, or the JSON alone)."""
    print(f"[runtime_scaling] {msg}", file=sys.stderr, flush=True)


# --- the partition -----------------------------------------------------------------------------
def cached_partition(npz: Path, parts: int, cache: Path) -> tuple[Path, dict[str, Any] | None]:
    """The ``parts``-part partition of ``npz`` (``dglctl partition --regime lean`` in a child
    process) in ``cache/parts-<graph>-p<parts>/``, made unless its config is there. Returns the
    config's path and, when it was made, the run's seconds and peak RSS (None when reused)."""
    out = cache / f"parts-{npz.stem.removeprefix('graph-')}-p{parts}"
    configs = sorted(out.glob("*.json")) if out.is_dir() else []
    if configs:  # written under a temporary name, renamed when whole: a config means whole
        log(f"reusing the partition {configs[0]}")
        return configs[0], None
    cmd = [sys.executable, "-m", "dglctl", "partition", "--input", str(npz), "--num-parts",
           str(parts), "--out", str(out), "--regime", "lean"]
    log(f"partitioning {npz.name} into {parts} parts (--regime lean) -> {out}")
    # run_child has no ``finally`` that stops its child: an interrupted benchmark must not
    # leave a partitioner holding gigabytes (it removes its temporary folder on SIGTERM).
    code, _, stderr, wall, peak = run_child(cmd, cwd=REPO, interval=0.05,
                                            preexec_fn=end_with_this_process)
    if code != 0:
        raise RuntimeError(f"dglctl partition exited {code}: {stderr.strip()[-2000:]}")
    configs = sorted(out.glob("*.json"))
    if not configs:
        raise RuntimeError(f"dglctl partition wrote no config into {out}")
    log(f"partitioned in {wall:.1f} s, peak RSS {peak / 1e9:.2f} GB")
    return configs[0], {"seconds": wall, "peak_bytes": peak, "command": cmd}


def partition_figures(config: Path) -> dict[str, Any]:
    """What the partition's config says of its size: graph name, nodes, edges, the feature
    width, and per part its owned nodes, edges (in-edges of its nodes) and training nodes."""
    cfg = json.loads(config.read_text())
    (ntype, node_ranges), = cfg["node_map"].items()  # one node and one edge type here
    (_, edge_ranges), = cfg["edge_map"].items()
    quality = {p["part"]: p for p in cfg.get("quality", {}).get("parts", [])}
    feat = cfg["feature_schema"]["node"][f"{ntype}/feat"]["shape"]
    return {"graph_name": cfg["graph_name"], "nodes": cfg["num_nodes"],
            "edges": cfg["num_edges"], "feat_dim": feat[0], "parts": cfg["num_parts"],
            "part_nodes": [hi - lo for lo, hi in node_ranges],
            "part_edges": [hi - lo for lo, hi in edge_ranges],
            "part_train": [quality.get(i, {}).get("train_nodes")
                           for i in range(cfg["num_parts"])],
            "edge_cut_pct": cfg.get("quality", {}).get("edge_cut_pct")}


# --- the servers -------------------------------------------------------------------------------
def _manifest(arena: Any) -> Path:
    """The manifest file a machine's main server publishes once its partition is in shared
    memory (``ShmArena.publish``)."""
    return arena.root / f"{arena.prefix}manifest.json"


def wait_ready(servers: Any, arenas: list[Any], t0: float,
               timeout: float = READY_TIMEOUT) -> list[dict[str, float]]:
    """Seconds from ``t0`` (the spawn) until each machine's main server has published its
    shared memory (``loaded_s``) and until its port accepts a connection (``startup_s``: a
    server binds only once loaded, and this is the launcher's own readiness test,
    dglctl/agent/processes.py ``cmd_listening``), every machine watched at once; then one
    handshake with every server (they serve). Raises when a server exits or ``timeout``
    passes."""
    from runtime.rpc.client import ServerPool
    from runtime.rpc.ip_config import read_ip_config

    machines = read_ip_config(servers.ip_config)
    loaded: list[float | None] = [None] * len(machines)
    ready: list[float | None] = [None] * len(machines)
    deadline = time.monotonic() + timeout
    while any(r is None for r in ready):
        for i, m in enumerate(machines):
            if loaded[i] is None and _manifest(arenas[i]).exists():
                loaded[i] = time.perf_counter() - t0
            if ready[i] is None:
                try:  # refused at once while nothing listens
                    socket.create_connection((m.ip, m.server_port(0)), timeout=1.0).close()
                except OSError:
                    continue
                ready[i] = time.perf_counter() - t0
                if loaded[i] is None:  # published between the two looks
                    loaded[i] = ready[i]
        dead = [(i, p.returncode) for i, p in enumerate(servers.procs) if p.poll() is not None]
        if dead:
            raise RuntimeError(f"server(s) exited while starting (index, exit code): {dead}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"servers not all listening after {timeout:.0f} s: {ready}")
        time.sleep(0.02)
    pool = ServerPool(machines, servers.num_servers, servers.token, 60.0, client_name="probe",
                      keeps_server=False)
    try:
        pool.connect()
    finally:
        pool.close()
    return [{"loaded_s": float(lo or 0.0), "startup_s": float(r or 0.0)}  # all set by now
            for lo, r in zip(loaded, ready, strict=True)]


def machine_memory(pid: int, arena: Any) -> dict[str, Any]:
    """One machine's memory for the job: its shared-memory files (blocks allocated, per
    tensor) and its server's /proc/PID/status lines, in bytes."""
    by_tensor: dict[str, int] = {}
    for f in arena.files():
        try:
            blocks = f.stat().st_blocks * 512  # tmpfs pages held (the arena reserves them all)
        except FileNotFoundError:
            continue
        # File names are the tensor names %-encoded (runtime/store/shm.py, _encode).
        by_tensor[unquote(f.name.removeprefix(arena.prefix).removesuffix(".npy"))] = blocks
    st = proc_status(pid)
    return {"shm_bytes": sum(by_tensor.values()), "shm_files": len(by_tensor),
            "shm_by_tensor": by_tensor, "rss_bytes": st.get("VmRSS"),
            "rss_shmem_bytes": st.get("RssShmem"), "rss_anon_bytes": st.get("RssAnon"),
            "rss_file_bytes": st.get("RssFile"), "peak_rss_bytes": st.get("VmHWM")}


def run_client(servers: Any, work: Path, graph_name: str, repeat: int,
               timeout: float = CLIENT_TIMEOUT) -> dict[str, Any]:
    """The trainer-like client on machine 0 in a child process (:func:`client_main`), with
    the env contract of the job's trainer 0; its figures. The child leads its own process
    group, stopped (TERM, then KILL) if it outlives ``timeout`` or this process is stopped."""
    from testing.procs import terminate_groups

    out, logf = work / "client.json", work / "client.log"
    code = ("import sys; from pathlib import Path; import bench.runtime_scaling as b; "
            "b.client_main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))")
    with open(logf, "w") as f:
        proc = subprocess.Popen([sys.executable, "-c", code, str(out), graph_name, str(repeat)],
                                cwd=REPO, env=servers.env("trainer", 0), stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = proc.wait(timeout)
    finally:
        terminate_groups([proc], grace=10)
    if rc != 0 or not out.exists():
        raise RuntimeError(f"the client exited {rc}: {logf.read_text()[-2000:]}")
    return {**json.loads(out.read_text()), "pid": proc.pid}


def client_main(out: Path, graph_name: str, repeat: int) -> None:
    """Entry of the client process (the env contract already set): picks 1000 random
    training seeds, then bench.runtime_bench.measure_through_servers; writes JSON to ``out``."""
    import runtime as dg
    from bench.runtime_bench import measure_through_servers

    dg.initialize()
    try:
        g = dg.DistGraph(graph_name)
        rng = np.random.default_rng(0)
        n = g.num_nodes()
        # 4x the seeds drawn at random, the training ones kept (60 % of the generated graph's
        # nodes train: ~2400 for 1000); the mask is pulled for the candidates only.
        cand = rng.choice(n, min(n, 4 * SEEDS), replace=False)
        train = cand[np.asarray(g.ndata["train_mask"][cand]).astype(bool)]
        if len(train) < SEEDS:
            raise RuntimeError(f"{len(train)} training nodes among {len(cand)} drawn; need "
                               f"{SEEDS}")
        r = measure_through_servers(g, train[:SEEDS], rng, repeat)
    finally:
        dg.exit_client()
    out.write_text(json.dumps({**r, "seeds": SEEDS, "repeat": repeat}))


def measure_servers(config: Path, work: Path, fig: dict[str, Any],
                    repeat: int) -> dict[str, Any]:
    """Steps 3 and 4 of the module: the servers' start-up and memory per machine, and the
    client's figures; everything stopped and checked before it returns or raises."""
    from bench.jobs import leftover_report, start_servers
    from runtime.store.shm import ShmArena

    parts = fig["parts"]
    ips = [f"127.0.0.{i + 1}" for i in range(parts)]
    t0 = time.perf_counter()
    servers = start_servers(config, 1, work, ips=ips)
    arenas = [ShmArena(servers.job_id, m) for m in range(parts)]
    pgids = [p.pid for p in servers.procs]  # each leads its own group (start_new_session)
    out: dict[str, Any] = {"job": servers.job_id}
    try:
        log(f"servers of job {servers.job_id} on {', '.join(ips)}: waiting until they answer")
        times = wait_ready(servers, arenas, t0)
        log("start-up (s): " + ", ".join(f"machine {m} {t['startup_s']:.2f} (loaded "
                                          f"{t['loaded_s']:.2f})" for m, t in enumerate(times)))
        at_ready = [machine_memory(p.pid, a) for p, a in zip(servers.procs, arenas, strict=True)]
        out["machines"] = [{**t, **mem} for t, mem in zip(times, at_ready, strict=True)]
        log(f"client on machine 0: sampling, remote pull, local rows (repeat {repeat})")
        client = run_client(servers, work, fig["graph_name"], repeat)
        pgids.append(client.pop("pid"))
        out["client"] = client
        after = [machine_memory(p.pid, a) for p, a in zip(servers.procs, arenas, strict=True)]
        for m, mem in zip(out["machines"], after, strict=True):
            m["after_client"] = {k: v for k, v in mem.items() if k != "shm_by_tensor"}
    finally:
        servers.stop()
        for a in arenas:  # a main server killed (not ended) cannot remove its files
            a.cleanup()
    left = _gone(lambda: leftover_report(servers.job_id, pgids))
    if left:
        raise RuntimeError(f"job {servers.job_id} left {left}")
    return out


# --- the training example ------------------------------------------------------------------------
def cluster_file(work: Path, hosts: int, startup_s: float | None) -> tuple[Path, float]:
    """A local cluster file (bench.jobs.local_cluster_file: one server and one trainer per
    host, no samplers) whose timeout lets the launcher wait twice ``startup_s`` for the
    servers; the file and that timeout."""
    import yaml

    from bench.jobs import local_cluster_file

    path = local_cluster_file(work / "cluster.yaml", hosts=hosts, trainers=1, samplers=0,
                              workspace=work / "ws")
    cfg = yaml.safe_load(path.read_text())
    floor, per_timeout = LAUNCH_SERVER_WAIT
    timeout = float(cfg["timeout"])
    if startup_s is not None and 2 * startup_s > max(floor, per_timeout * timeout):
        timeout = math.ceil(2 * startup_s / per_timeout)
        cfg["timeout"] = timeout
        path.write_text(yaml.safe_dump(cfg))
    return path, timeout


def _launched_jobs(work: Path) -> list[dict[str, Any]]:
    """The manifests of the jobs launched with ``work``'s DGLCTL_HOME (bench.jobs.cli_env)."""
    out = []
    for path in sorted((work / "home" / "jobs").glob("*.json")):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "job_id" in manifest:
            out.append(manifest)
    return out


def _stop_launched(work: Path, env: dict[str, str]) -> None:
    """``dglctl stop`` of every job launched with ``work``'s home (a stopped job is left as
    it is)."""
    for manifest in _launched_jobs(work):
        job = manifest["job_id"]
        stop = subprocess.run([sys.executable, "-m", "dglctl", "stop", job], cwd=REPO,
                              capture_output=True, text=True, env=env, timeout=300)
        if stop.returncode != 0:
            log(f"dglctl stop {job} exited {stop.returncode}: {stop.stderr.strip()[-500:]}")


def _leftovers_of(work: Path) -> list[str]:
    """What is left of the jobs launched with ``work``'s home (bench.jobs.leftover_report)."""
    from bench.jobs import leftover_report

    return [x for m in _launched_jobs(work)
            for x in leftover_report(m["job_id"], [p["pgid"] for p in m.get("procs", [])])]


def _gone(check: Callable[[], list[str]], seconds: float = 10.0) -> list[str]:
    """``check()`` until it finds nothing or ``seconds`` have passed (a process stopped a
    moment ago may still be exiting); what it found last."""
    deadline = time.monotonic() + seconds
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def measure_training(config: Path, work: Path, fig: dict[str, Any], steps: int,
                     startup_s: float | None,
                     timeout: float = LAUNCH_TIMEOUT) -> dict[str, Any]:
    """Step 5 of the module: examples/train_dist.py launched for 2 epochs of ``steps`` steps
    (fewer when an epoch has fewer); seconds per step from the second epoch, the epoch time
    extrapolated, the launcher's own step times. The launcher is stopped with SIGTERM (its
    orderly teardown) if it outlives ``timeout`` or this process is stopped; every job it
    recorded is then stopped with ``dglctl stop`` and checked for leftovers."""
    from bench.epoch_bench import parse_epoch_line
    from bench.jobs import cli_env

    parts = fig["parts"]
    cluster, cluster_timeout = cluster_file(work, parts, startup_s)
    train = sum(t for t in fig["part_train"] if t is not None)
    per_trainer = math.ceil(train / parts)  # node_split(force_even=True), one trainer a host
    steps_per_epoch = math.ceil(per_trainer / BATCH)  # the loader keeps the last short batch
    run_steps = min(steps, steps_per_epoch)
    env = cli_env(work)
    cmd = [sys.executable, "-m", "dglctl", "launch", "--cluster", str(cluster),
           "--part-config", str(config), str(REPO / "examples" / "train_dist.py"),
           "--graph-name", fig["graph_name"], "--num-epochs", "2", "--max-steps",
           str(run_steps), "--batch-size", str(BATCH), "--fan-out", FAN_OUT, "--no-eval"]
    log(f"dglctl launch examples/train_dist.py: {parts} hosts x 1 trainer, 2 epochs of "
        f"{run_steps} steps (cluster timeout {cluster_timeout:g} s)")
    outf, errf = work / "launch.out", work / "launch.err"
    t0 = time.perf_counter()
    clean = False
    with open(outf, "w") as fo, open(errf, "w") as fe:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fo, stderr=fe,
                                start_new_session=True)
    try:
        rc = proc.wait(timeout)
        wall = time.perf_counter() - t0
        clean = rc == 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the launcher stops its job, then exits
            try:
                proc.wait(GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # After a clean run the launcher has stopped its job: only checked. Otherwise
        # stopped here too (the launcher may have died before its teardown).
        if not clean:
            _stop_launched(work, env)
        left = _gone(lambda: _leftovers_of(work))
    stdout, stderr = outf.read_text(), errf.read_text()
    if rc != 0:
        raise RuntimeError(f"dglctl launch exited {rc}: {(stdout + stderr).strip()[-2000:]}")
    if left:
        raise RuntimeError(f"the launched job left {left}")
    epochs = {int(m.group(1)): parse_epoch_line(line) for line in stdout.splitlines()
              if (m := EPOCH.search(line))}
    if 1 not in epochs:
        raise RuntimeError(f"no 'epoch 1' line in the launch output:\n{stdout[-2000:]}")
    s_step = epochs[1]["epoch_s"] / run_steps
    return {"command": cmd, "hosts": parts, "trainers": parts, "batch_size": BATCH,
            "fan_out": FAN_OUT, "steps": run_steps, "train_nodes": train,
            "steps_per_epoch": steps_per_epoch, "s_per_step": s_step,
            "warmup_s_per_step": epochs[0]["epoch_s"] / run_steps if 0 in epochs else None,
            "epoch_estimate_s": steps_per_epoch * s_step, "extrapolated": True,
            "split": epochs[1]["split"], "epochs": epochs, "launch_s": wall,
            "launcher_steps": {m.group(1): float(m.group(2))
                               for m in LAUNCH_STEP.finditer(stderr)},
            "cluster_timeout": cluster_timeout,
            "jobs": [m["job_id"] for m in _launched_jobs(work)]}


# --- one size ----------------------------------------------------------------------------------
def measure_size(label: str, edges: int, *, cache: Path, parts: int, feat_dim: int,
                 steps: int, repeat: int) -> dict[str, Any]:
    """Every figure of one size. A step that fails leaves the figures of the steps before it
    in the result (status "failed", with why); nothing of its jobs is left running."""
    r: dict[str, Any] = {"status": "failed", "size": label, "edges_asked": edges}
    work = Path(tempfile.mkdtemp(prefix=f"dglctl-runtime-scaling-{label}-"))
    try:
        npz, gen_s = cached_graph(cache, edges, AVG_DEGREE, feat_dim)
        r.update(npz=str(npz), generate_seconds=gen_s)
        config, made = cached_partition(npz, parts, cache)
        fig = partition_figures(config)
        r.update(part_config=str(config), partition=made, **fig)
        log(f"{label}: {fig['nodes']:,} nodes, {fig['edges']:,} directed edges, "
            f"{fig['parts']} parts")
        r["servers"] = measure_servers(config, work, fig, repeat)
        startup = max(m["startup_s"] for m in r["servers"]["machines"])
        r["training"] = measure_training(config, work, fig, steps, startup)
        r["status"] = "measured"
    except Exception as e:  # noqa: BLE001 - one failed size must not hide the others
        log(f"{label}: FAILED\n{traceback.format_exc()}")
        r["why"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the launch's workspace holds a partition copy
    return r


# --- output --------------------------------------------------------------------------------------
def _gb(x: float | None) -> str:
    return f"{x / 1e9:.3f}" if x is not None else "-"


def _div(x: float | None, y: float) -> float | None:
    return x / y if x is not None else None


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return format(x, fmt) if x is not None else "-"


# The per-machine rows of the table by size: label, value of (machine's figures, its part's
# owned edges), format. Values in bytes or None (not read) are divided by _div.
MACHINE_ROWS: list[tuple[str, Callable[[dict[str, Any], int], float | None], str]] = [
    ("start-up s", lambda mm, e: mm["startup_s"], ".2f"),
    ("loaded s", lambda mm, e: mm["loaded_s"], ".2f"),
    ("load rate GB/s (shm / loaded s)", lambda mm, e: mm["shm_bytes"] / mm["loaded_s"] / 1e9,
     ".3f"),
    ("shm GB", lambda mm, e: mm["shm_bytes"] / 1e9, ".3f"),
    ("shm B/edge", lambda mm, e: mm["shm_bytes"] / e, ".1f"),
    ("server RSS GB", lambda mm, e: _div(mm["rss_bytes"], 1e9), ".3f"),
    ("server RssShmem GB", lambda mm, e: _div(mm["rss_shmem_bytes"], 1e9), ".3f"),
    ("server RssAnon GB", lambda mm, e: _div(mm["rss_anon_bytes"], 1e9), ".3f"),
    ("server RssAnon B/edge", lambda mm, e: _div(mm["rss_anon_bytes"], e), ".2f"),
    ("server peak RSS GB (VmHWM)", lambda mm, e: _div(mm["peak_rss_bytes"], 1e9), ".3f"),
    ("server RSS GB after the client",
     lambda mm, e: _div(mm.get("after_client", {}).get("rss_bytes"), 1e9), ".3f"),
    ("shm + server RssAnon GB", lambda mm, e: (mm["shm_bytes"] + (mm["rss_anon_bytes"] or 0))
     / 1e9, ".3f"),
]


def figures(r: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    """The size's figures by row label: (value, format); None where not measured."""
    out: dict[str, tuple[float | None, str]] = {}
    if r.get("partition"):
        out["partition s (lean)"] = (r["partition"]["seconds"], ".1f")
        out["partition peak GB"] = (r["partition"]["peak_bytes"] / 1e9, ".2f")
    srv, tr = r.get("servers", {}), r.get("training", {})
    machines = srv.get("machines", [])
    for label, value, fmt in MACHINE_ROWS:
        for m, mm in enumerate(machines):
            out[f"{label}, machine {m}"] = (value(mm, r["part_edges"][m]), fmt)
    if machines:
        out["shm B/edge, all machines"] = (
            sum(mm["shm_bytes"] for mm in machines) / r["edges"], ".1f")
    c = srv.get("client")
    if c:
        out["sampling seeds/s"] = (c["dist_seeds_s"], ",.0f")
        out["sampling edges/s (M)"] = (c["dist_edges_s"] / 1e6, ".2f")
        out["remote pull GB/s"] = (c["pull_remote_gbs"], ".3f")
        out["bare pyzmq GB/s (baseline)"] = (c["bare_zmq_gbs"], ".3f")
        out["local rows GB/s"] = (c["pull_local_gbs"], ".3f")
        out["numpy fancy indexing GB/s (baseline)"] = (c["numpy_local_gbs"], ".3f")
    if tr:
        out["s/step"] = (tr["s_per_step"], ".4f")
        out["warm-up s/step (epoch 0)"] = (tr["warmup_s_per_step"], ".4f")
        out["steps per epoch"] = (tr["steps_per_epoch"], ",.0f")
        out["epoch estimate s (extrapolated)"] = (tr["epoch_estimate_s"], ".1f")
        out["launch to the end s"] = (tr["launch_s"], ".1f")
        for k, v in tr["launcher_steps"].items():
            out[f"launcher step {k} s"] = (v, ".2f")
    return out


def size_lines(r: dict[str, Any]) -> list[str]:
    """One size's block: the servers per machine, the client's figures, the training."""
    head = f"\n== {r['size']}"
    if "nodes" in r:
        p = r.get("partition")
        head += (f": {r['nodes']:,} nodes, {r['edges']:,} directed edges, {r['feat_dim']}-wide "
                 f"float32 features, {r['parts']} parts ("
                 + (f"partitioned in {p['seconds']:.1f} s, peak {_gb(p['peak_bytes'])} GB"
                    if p else "partition reused") + ")")
    lines = [head]
    srv = r.get("servers", {})
    if srv.get("machines"):
        lines.append("  servers, 1 per machine, started directly, all at once (s from the "
                     "spawn; memory when every server answered)")
        cols = ["machine", "part edges", "start-up s", "loaded s", "shm GB", "shm B/edge",
                "RSS GB", "RssShmem GB", "RssAnon GB", "peak RSS GB"]
        rows = [[str(m), f"{r['part_edges'][m]:,}", f"{mm['startup_s']:.2f}",
                 f"{mm['loaded_s']:.2f}", _gb(mm["shm_bytes"]),
                 f"{mm['shm_bytes'] / r['part_edges'][m]:.1f}", _gb(mm["rss_bytes"]),
                 _gb(mm["rss_shmem_bytes"]), _gb(mm["rss_anon_bytes"]),
                 _gb(mm["peak_rss_bytes"])] for m, mm in enumerate(srv["machines"])]
        lines += _table(cols, rows)
        for m, mm in enumerate(srv["machines"]):
            big = sorted(mm["shm_by_tensor"].items(), key=lambda kv: -kv[1])[:4]
            lines.append(f"  machine {m} shm: " + ", ".join(f"{k} {_gb(v)}" for k, v in big)
                         + (f"; after the client: RSS {_gb(mm['after_client']['rss_bytes'])} "
                            f"GB, RssShmem {_gb(mm['after_client']['rss_shmem_bytes'])} GB, "
                            f"RssAnon {_gb(mm['after_client']['rss_anon_bytes'])} GB"
                            if "after_client" in mm else ""))
    c = srv.get("client")
    if c:
        lines += [
            f"  client on machine 0: sampling [10, 25], {c['seeds']} training seeds through "
            f"the servers: {c['dist_seeds_s']:,.0f} seeds/s ({c['dist_edges_s'] / 1e6:.2f}M "
            f"edges/s), median of {c['repeat']}",
            f"  remote pull, 10k rows x {c['feat_dim']} float32 owned by machine 1: "
            f"{c['pull_remote_gbs']:.3f} GB/s | bare pyzmq round trip "
            f"{c['bare_zmq_gbs']:.3f} GB/s | ratio {c['pull_remote_gbs'] / c['bare_zmq_gbs']:.2f}",
            f"  local rows from shared memory: {c['pull_local_gbs']:.3f} GB/s | numpy fancy "
            f"indexing {c['numpy_local_gbs']:.3f} GB/s | ratio "
            f"{c['pull_local_gbs'] / c['numpy_local_gbs']:.2f}"]
    tr = r.get("training")
    if tr:
        split = ", ".join(f"{k} {v:.2f}s" for k, v in tr["split"].items())
        steps = ", ".join(f"{k} {v:.1f}" for k, v in tr["launcher_steps"].items())
        warm = (f"; epoch 0, the warm-up: {tr['warmup_s_per_step']:.4f} s/step"
                if tr["warmup_s_per_step"] is not None else "")
        lines += [
            f"  training: examples/train_dist.py by dglctl launch, {tr['hosts']} hosts x 1 "
            f"trainer, batch {tr['batch_size']} per trainer, fan-out {tr['fan_out']}",
            f"    {tr['s_per_step']:.4f} s/step (epoch 1, {tr['steps']} steps{warm}); epoch 1: "
            f"{split}",
            f"    epoch estimate {tr['epoch_estimate_s']:.1f} s = {tr['steps_per_epoch']:,} "
            f"steps x {tr['s_per_step']:.4f} s/step (EXTRAPOLATED from {tr['steps']} steps; "
            f"{tr['train_nodes']:,} training nodes over {tr['trainers']} trainers)",
            f"    launch to the end {tr['launch_s']:.1f} s (launcher steps, s: {steps}; "
            f"cluster timeout {tr['cluster_timeout']:g} s)"]
    if r["status"] != "measured":
        lines.append(f"  FAILED: {r.get('why')}")
    return lines


def _table(cols: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(c), *(len(v[i]) for v in rows)) + 2 for i, c in enumerate(cols)]
    return [indent + "".join(f"{v:>{w}}" for v, w in zip(vals, widths, strict=True))
            for vals in [cols, *rows]]


def scaling_lines(results: list[dict[str, Any]]) -> list[str]:
    """Every size's figures side by side (sizes measured in part included), and the ratio of
    each later size to the first."""
    shown = [r for r in results if "servers" in r]
    if not shown:
        return []
    figs = [figures(r) for r in shown]
    labels = list(dict.fromkeys(k for f in figs for k in f))
    base = shown[0]["size"]
    cols = ["figure", *(r["size"] for r in shown),
            *(f"{r['size']}/{base}" for r in shown[1:])]
    rows = []
    for k in labels:
        vals = [f.get(k, (None, ""))[0] for f in figs]
        fmt = next(f[k][1] for f in figs if k in f)
        ratios = [f"{v / vals[0]:.2f}" if v is not None and vals[0] else "-" for v in vals[1:]]
        rows.append([k, *(_num(v, fmt) for v in vals), *ratios])
    widths = [max(len(c), *(len(v[i]) for v in rows)) + 2 for i, c in enumerate(cols)]
    lines = [f"\n== by size: each figure, and each size / {base} (B/edge: per owned directed "
             "edge of the machine's part; the epoch is extrapolated from s/step)"]
    for vals in [cols, *rows]:
        lines.append("  " + f"{vals[0]:<{widths[0]}}"
                     + "".join(f"{v:>{w}}" for v, w in zip(vals[1:], widths[1:], strict=True)))
    return lines


# --- main ----------------------------------------------------------------------------------------
def _interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Measure every size, one after the other; print the tables (or the JSON alone), write
    the JSON to --out. Exit status 1 if any size failed."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--edges", default="20M,200M",
                    help="comma-separated sizes in directed edges, suffixes k/M/G [20M,200M]")
    ap.add_argument("--parts", type=int, default=2, help="parts = machines [2]")
    ap.add_argument("--feat-dim", type=int, default=128, help="feature width [128]")
    ap.add_argument("--steps", type=int, default=50,
                    help="training steps per epoch, 2 epochs (the first is the warm-up) [50]")
    ap.add_argument("--repeat", type=int, default=5,
                    help="samples timed (median); the pulls are timed 20x and 40x this [5]")
    ap.add_argument("--json", action="store_true", help="print the JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write runtime_scaling.json here")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where graphs and partitions are kept and reused "
                         "[bench-out/partition_scaling/cache; --smoke: a temporary folder]")
    ap.add_argument("--smoke", action="store_true",
                    help=f"one size of {SMOKE_EDGES} edges, {SMOKE_FEAT_DIM}-wide features, "
                         f"{SMOKE_STEPS} steps: does it run? (meaningless numbers)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.edges, args.feat_dim = SMOKE_EDGES, SMOKE_FEAT_DIM
        args.steps, args.repeat = SMOKE_STEPS, SMOKE_REPEAT
    try:
        sizes = [(s.strip(), parse_size(s)) for s in args.edges.split(",") if s.strip()]
    except ValueError as e:
        ap.error(str(e))
    if args.parts < 2:
        ap.error("--parts: at least 2 (the remote pull reads machine 1's rows)")
    if args.steps < 1 or args.repeat < 1:
        ap.error("--steps and --repeat: at least 1")
    temporary = None
    cache = args.cache
    if cache is None:
        if args.smoke:
            cache = temporary = Path(tempfile.mkdtemp(prefix="dglctl-runtime-scaling-"))
        else:
            cache = REPO / "bench-out" / "partition_scaling" / "cache"
    saved = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "settings": {"edges": [label for label, _ in sizes], "parts": args.parts,
                     "feat_dim": args.feat_dim, "avg_degree": AVG_DEGREE, "steps": args.steps,
                     "repeat": args.repeat, "seeds": SEEDS, "batch_size": BATCH,
                     "fan_out": FAN_OUT, "smoke": args.smoke, "cache": str(cache)},
        "machine": machine(), "sizes": []}
    try:
        for label, edges in sizes:
            r = measure_size(label, edges, cache=cache, parts=args.parts,
                             feat_dim=args.feat_dim, steps=args.steps, repeat=args.repeat)
            results["sizes"].append(r)
            if not args.json:
                print("\n".join(size_lines(r)), flush=True)
    except Interrupted as e:
        log(f"stopped by {e}: every process of the size in progress was stopped")
        return 1
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    results["seconds"] = time.perf_counter() - t0
    return report_sizes(results, args.out, "runtime_scaling.json", args.json, scaling_lines)


if __name__ == "__main__":
    sys.exit(main())
