"""Launch, supervise and stop a job on every host: preflight, copy, servers, trainers, teardown.

One teardown path: any failure, a non-zero exit of any process, Ctrl-C, SIGTERM or SIGHUP
raise out of the supervision loop into a single ``finally`` that stops every recorded process
group on every host (TERM, grace period, KILL) and removes the job's shared memory.
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .cluster_config import ClusterConfig
from .errors import EXIT_FAILURE, DglctlError
from .jobs import HostRecord, JobManifest, ProcRecord, dglctl_home, new_job_id
from .transport import Transport, make_transport

GRACE_SECONDS = 10.0


class PreflightError(DglctlError):
    """Problems found before anything started (all of them, one report)."""


class JobFailed(DglctlError):
    """A process of the job failed; the message leads with the root cause."""

    exit_code = EXIT_FAILURE


class Interrupted(DglctlError):
    """The launcher received Ctrl-C, SIGTERM or SIGHUP, or 'dglctl stop' stopped the job."""

    exit_code = 130


@dataclass
class LaunchOptions:
    script: Path
    script_args: list[str]
    part_config: Path
    detach: bool = False
    port_base_explicit: bool = False


def parallel(transports: list[Transport], fn: Callable[[int, Transport], Any]) -> list[Any]:
    """Run ``fn`` for every host at once; wait for all; raise one error listing each failure."""
    with ThreadPoolExecutor(max(1, len(transports))) as pool:
        futures = [pool.submit(fn, i, t) for i, t in enumerate(transports)]
    results, errors = [], []
    for t, f in zip(transports, futures, strict=True):
        try:
            results.append(f.result())
        except DglctlError as e:
            errors.append(e.message + (f"\n  hint: {e.hint}" if e.hint else ""))
            results.append(None)
        except Exception as e:  # noqa: BLE001 - reported per host
            errors.append(f"host {t.host.name}: {type(e).__name__}: {e}")
            results.append(None)
    if errors:
        raise DglctlError("\n".join(errors))
    return results


class _Signalled(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_on_signals() -> dict[int, Any]:
    def handler(signum, frame):  # noqa: ARG001
        raise _Signalled(signum)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        old[sig] = signal.signal(sig, handler)
    return old


class Launcher:
    """One ``dglctl launch``: owns the transports and the manifest of the job."""

    def __init__(self, cluster: ClusterConfig, opts: LaunchOptions, display) -> None:
        self.cluster = cluster
        self.opts = opts
        self.display = display
        self.job_id = new_job_id()
        self.token = secrets.token_hex(16)
        self.part_cfg = self._read_part_config()
        self.hosts = cluster.hosts[: self.part_cfg["num_parts"]]
        self.transports = [make_transport(h, cluster) for h in self.hosts]
        self.manifest: JobManifest | None = None
        self.offsets: dict[str, int] = {}
        self.master_port = 0

    # --- steps -------------------------------------------------------------------------------
    def _read_part_config(self) -> dict[str, Any]:
        from partitioner.errors import PartitionerError
        from partitioner.format import read_config

        try:
            cfg = read_config(self.opts.part_config)
        except PartitionerError as e:
            raise DglctlError(e.message, hint=e.hint) from None
        n, h = cfg["num_parts"], len(self.cluster.hosts)
        if n > h:
            raise DglctlError(
                f"{cfg['_path']} has {n} parts but {self.cluster.path} lists {h} host(s)",
                hint="one host per part: add hosts, or re-partition with --num-parts "
                     f"{h}")
        if not self.opts.script.is_file():
            raise DglctlError(f"training script {self.opts.script}: no such file")
        from partitioner.format import verify_files

        # Sizes only here (cheap); checksums are compared on the hosts after copying.
        problems = verify_files(cfg, list(range(n)), checksums=False)
        if problems:
            raise DglctlError(
                f"{cfg['_path']}: the partition is incomplete:\n  " + "\n  ".join(problems[:10]),
                hint="re-run 'dglctl partition', or 'dglctl inspect' to see every problem")
        return cfg

    def run(self) -> int:
        """The whole launch; returns the exit code (0 when every trainer succeeded)."""
        old = _raise_on_signals()
        started = False
        try:
            self._step(1, "preflight", self.preflight)
            self._step(2, "copy", self.copy)
            started = True
            self._step(3, "servers", self.start_servers)
            self._step(4, "trainers", self.start_trainers)
            if self.opts.detach:
                self.manifest.state = "running"
                self.manifest.save()
                self.display.result(f"job {self.job_id} running (detached); follow it with "
                                    f"'dglctl logs {self.job_id} -f', end it with "
                                    f"'dglctl stop {self.job_id}'")
                return 0
            self.display.info(f"[5/5] running job {self.job_id} (Ctrl-C stops it on every host)")
            return self.supervise()
        except _Signalled as s:
            name = signal.Signals(s.signum).name
            self.display.error(f"{name}: stopping job {self.job_id} on every host")
            if self.manifest is not None:
                self.manifest.state = "stopped"
            raise Interrupted(f"job {self.job_id} stopped on {name}") from None
        except BaseException:
            if self.manifest is not None and self.manifest.state not in ("failed", "stopped"):
                self.manifest.state = "failed"
            raise
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            if started and self.manifest is not None and not (
                    self.opts.detach and self.manifest.state == "running"):
                self.teardown()
            for t in self.transports:
                t.close()

    def _step(self, i: int, name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        self.display.info(f"[{i}/5] {name} ...")
        fn()
        self.display.info(f"      {name} done in {time.perf_counter() - t0:.1f}s")

    def preflight(self) -> None:
        """Every host: reachable, same Python and dglctl, ports free, disk space."""
        from dglctl import __version__

        local_py = ".".join(map(str, sys.version_info[:2]))
        need = self._bytes_per_host()
        base = self.cluster.port_base

        def check(i: int, t: Transport) -> dict[str, Any]:
            ports = list(range(base, base + self.cluster.servers_per_host + 200))
            return t.agent("preflight", "--workspace", t.workspace, "--bind",
                           t.host.data_address, "--ports", ",".join(map(str, ports)))

        reports = parallel(self.transports, check)
        problems = []
        for i, (t, r) in enumerate(zip(self.transports, reports, strict=True)):
            name = t.host.name
            t.workspace = r["workspace"]
            if ".".join(r["python"].split(".")[:2]) != local_py:
                problems.append(f"host {name}: Python {r['python']} ({r['executable']}), "
                                f"here {sys.version.split()[0]}: use the same minor version")
            if r["dglctl"] != __version__:
                problems.append(f"host {name}: dglctl {r['dglctl']}, here {__version__}: "
                                "install the same version")
            if not r["workspace_writable"]:
                problems.append(f"host {name}: workspace {r['workspace']} is not writable")
            elif r["disk_free"] < need[i]:
                problems.append(f"host {name}: {r['disk_free'] / 1e9:.1f} GB free in "
                                f"{r['workspace']}, the shards need {need[i] / 1e9:.1f} GB")
        chosen = self._choose_ports(reports)
        if chosen is None:
            busy = {self.hosts[i].name: sorted(set(r["ports_busy"]) & set(
                range(base, base + self.cluster.servers_per_host)))
                for i, r in enumerate(reports)}
            detail = "; ".join(f"host {h}: port(s) {', '.join(map(str, p))} in use"
                               for h, p in busy.items() if p)
            problems.append(detail or "no free server ports found")
        if problems:
            raise PreflightError(
                f"preflight found {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                hint="fix them and launch again; nothing was started")
        self.port_base, self.master_port = chosen

    def _choose_ports(self, reports: list[dict]) -> tuple[int, int] | None:
        """The configured port base if free on every host, else (unless given on the command
        line) the next free block, so two jobs on the same hosts do not collide."""
        base = self.cluster.port_base
        k = self.cluster.servers_per_host
        busy = set().union(*[set(r["ports_busy"]) for r in reports])
        candidates = [base] if self.opts.port_base_explicit else range(base, base + 200 - k, k + 1)
        for b in candidates:
            block = set(range(b, b + k + 1))  # servers, then the trainers' MASTER_PORT
            if not block & busy:
                if b != base:
                    self.display.info(f"      ports {base}.. are in use; using {b}..{b + k}")
                return b, b + k
        return None

    def _bytes_per_host(self) -> list[int]:
        files = self.part_cfg.get("files", {})
        return [sum(m["size"] for rel, m in files.items()
                    if rel.startswith(f"part{i}/") or not rel.startswith("part"))
                for i in range(len(self.hosts))]

    def _files_for(self, i: int) -> list[str]:
        return [rel for rel in self.part_cfg.get("files", {})
                if rel.startswith(f"part{i}/") or not rel.startswith("part")]

    def copy(self) -> None:
        """Each host gets its part, the config files and the script; unchanged files are skipped."""
        from runtime.rpc.ip_config import write_ip_config

        src_dir = Path(self.part_cfg["_dir"])
        graph = self.part_cfg["graph_name"]
        # Kept beside the job's manifest (not in /tmp, where every launch left a folder).
        self.local_ip_config = dglctl_home() / "jobs" / f"{self.job_id}.ip_config.txt"
        self.local_ip_config.parent.mkdir(parents=True, exist_ok=True)
        write_ip_config(self.local_ip_config, [(h.data_address, self.port_base)
                                               for h in self.hosts])
        self._init_manifest()

        def copy_host(i: int, t: Transport) -> tuple[int, int]:
            rels = self._files_for(i)
            data_root = f"data/{graph}"
            have = t.agent("checksums", "--root", t.path(data_root), "--files", json.dumps(rels),
                           "--sizes-only")
            expected = self.part_cfg["files"]
            todo = [r for r in rels if have.get(r) is None or have[r]["size"] != expected[r]["size"]]
            # Same size is not proof: verify checksums of what is there (fast: xxh3).
            kept = [r for r in rels if r not in todo]
            if kept:
                sums = t.agent("checksums", "--root", t.path(data_root), "--files",
                               json.dumps(kept), timeout=600)
                todo += [r for r in kept if sums[r]["xxh3_128"] != expected[r]["xxh3_128"]]
            sent = 0
            for rel in todo:
                t.put(src_dir / rel, f"{data_root}/{rel}")
                sent += expected[rel]["size"]
            if todo:
                sums = t.agent("checksums", "--root", t.path(data_root), "--files",
                               json.dumps(todo), timeout=600)
                bad = [r for r in todo if sums[r] is None
                       or sums[r]["xxh3_128"] != expected[r]["xxh3_128"]]
                if bad:
                    raise DglctlError(f"host {t.host.name}: {len(bad)} copied file(s) fail their "
                                      f"checksum, e.g. {bad[0]}")
            t.put(Path(self.part_cfg["_path"]), f"{data_root}/{graph}.json")
            t.put(self.local_ip_config, f"jobs/{self.job_id}/ip_config.txt")
            t.put(self.opts.script, f"jobs/{self.job_id}/{self.opts.script.name}")
            return len(todo), sent

        t0 = time.perf_counter()
        stats = parallel(self.transports, copy_host)
        dt = max(time.perf_counter() - t0, 1e-6)
        for t, (n, sent) in zip(self.transports, stats, strict=True):
            note = (f"{n} file(s), {sent / 1e6:.1f} MB, {sent / 1e6 / dt:.0f} MB/s" if n
                    else "up to date")
            self.display.info(f"      {t.host.name}: {note}")

    def _init_manifest(self) -> None:
        self.manifest = JobManifest(
            job_id=self.job_id, token=self.token,
            cluster={"path": self.cluster.path, "transport": self.cluster.transport},
            script=str(self.opts.script), args=list(self.opts.script_args),
            part_config=str(self.part_cfg["_path"]), ip_config=str(self.local_ip_config),
            hosts=[HostRecord(t.host.name, t.host.address, t.host.data_address, t.workspace)
                   for t in self.transports])
        self.manifest.save()

    def _runtime_env(self, i: int, role: str, server_id: int = 0) -> dict[str, str]:
        from runtime.env import RuntimeEnv

        t = self.transports[i]
        graph = self.part_cfg["graph_name"]
        env = RuntimeEnv(
            role=role, job_id=self.job_id, token=self.token, machine_id=i,
            ip_config=t.path(f"jobs/{self.job_id}/ip_config.txt"),
            part_config=t.path(f"data/{graph}/{graph}.json"),
            num_servers=self.cluster.servers_per_host,
            num_trainers=self.cluster.trainers_per_host,
            num_samplers=self.cluster.samplers_per_trainer, server_id=server_id,
            timeout=self.cluster.timeout).to_environ()
        return {**self.cluster.env, **env}

    def _start(self, i: int, name: str, role: str, rank: int, argv: list[str],
               env: dict[str, str], port: int | None = None) -> None:
        t = self.transports[i]
        # The env (with the job token) travels as a 0600 file, never on a command line.
        t.put_bytes(json.dumps(env).encode(), f"jobs/{self.job_id}/{name}.env.json", mode=0o600)
        r = t.agent("start", "--workspace", t.workspace, "--job", self.job_id, "--name", name,
                    "--cwd", t.path(f"jobs/{self.job_id}"), "--argv", json.dumps(argv))
        self.manifest.procs.append(ProcRecord(name, i, role, rank, r["pgid"], r["log"], port))
        self.manifest.save()
        # The host keeps its own record (without the token), for whoever logs in there.
        mine = [asdict(p) for p in self.manifest.procs if p.host == i]
        t.put_bytes(json.dumps({"job_id": self.job_id, "host": t.host.name, "machine_id": i,
                                "processes": mine}, indent=1).encode(),
                    f"jobs/{self.job_id}/manifest.json")
        self.offsets[name] = 0

    def start_servers(self) -> None:
        """Start every server, then wait until each answers the job's handshake."""
        from runtime.errors import DistError
        from runtime.rpc.client import ServerPool
        from runtime.rpc.ip_config import read_ip_config

        for i, t in enumerate(self.transports):
            for k in range(self.cluster.servers_per_host):
                self._start(i, f"server-{i}-{k}", "server", k,
                            [t.python(), "-m", "runtime.server"],
                            self._runtime_env(i, "server", k), port=self.port_base + k)
        self.manifest.state = "starting"
        self.manifest.save()
        pool = ServerPool(read_ip_config(self.local_ip_config), self.cluster.servers_per_host,
                          self.token, self.cluster.timeout, client_name="dglctl-launch",
                          keeps_server=False)
        wait = max(60.0, self.cluster.timeout * 6)
        deadline = time.monotonic() + wait
        try:
            while True:
                self._check_processes()  # a server that died while loading fails fast
                try:
                    pool.connect(connect_timeout=2.0)
                    break
                except DistError:
                    if time.monotonic() > deadline:
                        raise JobFailed(f"servers did not all answer within {wait:.0f}s; "
                                        f"see 'dglctl logs {self.job_id}'") from None
                self._pump_logs()
        finally:
            pool.close()

    def start_trainers(self) -> None:
        """Start trainers with the torch.distributed environment and the runtime contract."""
        tph = self.cluster.trainers_per_host
        world = len(self.transports) * tph
        master = self.hosts[0].data_address
        for i, t in enumerate(self.transports):
            for local in range(tph):
                rank = i * tph + local
                env = self._runtime_env(i, "trainer")
                env.update(RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                           MASTER_ADDR=master, MASTER_PORT=str(self.master_port),
                           PYTHONUNBUFFERED="1")
                self._start(i, f"trainer-{i}-{local}", "trainer", rank,
                            [t.python(), self.opts.script.name, *self.opts.script_args], env,
                            port=self.master_port if rank == 0 else None)
        self.manifest.state = "running"
        self.manifest.save()

    # --- supervision -------------------------------------------------------------------------
    def _probe(self) -> dict[str, dict[str, Any]]:
        def probe(i: int, t: Transport):
            return t.agent("probe", "--workspace", t.workspace, "--job", self.job_id,
                           "--procs", json.dumps(self.manifest.procs_on(i)))

        states: dict[str, dict[str, Any]] = {}
        for r in parallel(self.transports, probe):
            states.update(r)
        return states

    def _check_processes(self) -> dict[str, dict[str, Any]]:
        states = self._probe()
        failed = [s for s in states.values()
                  if s["state"] == "missing" or (s["state"] in ("exited", "killed")
                                                 and s.get("code") != 0)]
        # A server that exits 0 has been told to, or saw every client go: not a failure.
        if failed:
            self._pump_logs()
            if JobManifest.load(self.job_id).state in ("stopping", "stopped"):
                # 'dglctl stop' from elsewhere: the processes it ended did not fail.
                self.manifest.state = "stopped"
                raise Interrupted(f"job {self.job_id} was stopped by 'dglctl stop'")
            raise JobFailed(self._root_cause(failed))
        return states

    def _root_cause(self, failed: list[dict[str, Any]]) -> str:
        first = min(failed, key=lambda s: s.get("ended", float("inf")))
        rec = next(p for p in self.manifest.procs if p.name == first["name"])
        host = self.transports[rec.host]
        how = {"exited": f"exited with code {first.get('code')}",
               "killed": f"was killed by signal {first.get('signal')} "
                         f"({_signame(first.get('signal'))})",
               "missing": "disappeared (killed together with its wrapper)",
               "running": "is running but its peers are gone"}[first["state"]]
        tail = host.agent("tail", "--workspace", host.workspace, "--job", self.job_id,
                          "--names", json.dumps([rec.name]), "--lines", "15")[rec.name]
        others = [s["name"] for s in failed if s is not first]
        msg = (f"job {self.job_id} failed: [{host.host.name} {rec.role} {rec.rank}] "
               f"({rec.name}, process group {rec.pgid}) {how}.")
        if others:
            msg += f" Also failed: {', '.join(others)}."
        if tail:
            msg += "\nlast lines of its log:\n    " + "\n    ".join(tail)
        self.manifest.result = {"root_cause": rec.name, "how": how}
        return msg

    def _pump_logs(self) -> None:
        """Print new log lines of every process, prefixed ``[host role rank]``."""
        procs = {p.name: p for p in self.manifest.procs}

        def fetch(i: int, t: Transport):
            names = {n: self.offsets.get(n, 0) for n in self.manifest.procs_on(i)}
            return t.agent("logs", "--workspace", t.workspace, "--job", self.job_id,
                           "--offsets", json.dumps(names)) if names else {}

        for result in parallel(self.transports, fetch):
            for name, chunk in result.items():
                text = chunk["text"]
                cut = text.rfind("\n") + 1  # print whole lines; keep the rest for next time
                self.offsets[name] = chunk["offset"] - (len(text.encode()) -
                                                        len(text[:cut].encode()))
                p = procs[name]
                prefix = f"[{self.transports[p.host].host.name} {p.role} {p.rank}] "
                for line in text[:cut].splitlines():
                    self.display.line(prefix + line)

    def supervise(self) -> int:
        """Stream logs and watch every process until all trainers end or one fails."""
        while True:
            self._pump_logs()
            states = self._check_processes()
            trainers = [s for n, s in states.items() if n.startswith("trainer")]
            if all(s["state"] == "exited" and s.get("code") == 0 for s in trainers):
                self._pump_logs()
                self.manifest.state = "succeeded"
                self.display.info(f"job {self.job_id}: every trainer finished")
                return 0
            time.sleep(0.3)

    def teardown(self) -> None:
        """Stop every recorded process group on every host and remove shared memory."""
        stop_job(self.manifest, self.transports, display=self.display)


def _signame(sig: int | None) -> str:
    try:
        return signal.Signals(sig).name if sig else "?"
    except ValueError:
        return "?"


def stop_job(manifest: JobManifest, transports: list[Transport], display=None,
             grace: float = GRACE_SECONDS) -> dict[str, Any]:
    """Ask each host's agent to stop the job's process groups; record the outcome."""

    def stop(i: int, t: Transport):
        procs = manifest.procs_on(i)
        return t.agent("stop", "--workspace", t.workspace, "--job", manifest.job_id,
                       "--procs", json.dumps(procs), "--grace", str(grace),
                       timeout=grace + 60)

    if manifest.state in ("starting", "running"):
        # Before any signal: a launcher supervising the job reads this when its processes
        # end, and reports a stop rather than a failure.
        manifest.state = "stopping"
        manifest.save()
    results = parallel(transports, stop)
    survivors = [n for r in results for n in r["survivors"]]
    if manifest.state == "stopping":
        manifest.state = "stopped"
    manifest.ended = manifest.ended or time.time()
    manifest.save()
    if survivors and display is not None:
        display.error(f"job {manifest.job_id}: processes survived SIGKILL: {survivors}")
    return {"hosts": results, "survivors": survivors}
