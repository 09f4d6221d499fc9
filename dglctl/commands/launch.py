"""The ``launch`` command: run a training script on every host, or print its plan (--dry-run)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import ClusterConfig
    from ..display import Display
    from ..jobs.plan import JobPlan

# Package data, so an installed dglctl has its default (configs/local.yaml links to it).
DEFAULT_CLUSTER = Path(__file__).resolve().parents[1] / "data" / "local.yaml"

# DGL's launch.py spells its options with underscores; its users type them from habit.
DGL_SPELLINGS = {"--num_trainers": "--num-trainers", "--num_servers": "--num-servers",
                 "--num_samplers": "--num-samplers", "--part_config": "--part-config",
                 "--ip_config": "--ip-config", "--num_server_threads": None,
                 "--num_omp_threads": None, "--workspace": None}


class LaunchCommand(click.Command):
    """``launch``'s argument order, as torchrun's: launcher options, SCRIPT, then everything
    for the script. The older ``SCRIPT OPTIONS -- ARGS`` also works: what stands between
    SCRIPT and the first ``--`` is read as launcher options, strictly (a misspelled one is
    an error, never passed on to the script)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        at = self._script_index(ctx, args)
        if at is not None:
            rest = args[at + 1:]
            if "--" in rest:
                cut = rest.index("--")
                args = [*args[:at], *rest[:cut], args[at], "--", *rest[cut + 1:]]
                at += cut
            for a in args[:at]:
                _check_dgl_spelling(a)
        try:
            return super().parse_args(ctx, list(args))  # click consumes the list it gets
        except click.MissingParameter as e:
            ours = {name for p in self.get_params(ctx) for name in getattr(p, "opts", [])}
            late = [a for a in args[(at or 0) + 1:] if a.split("=", 1)[0] in ours]
            if late:
                raise click.UsageError(
                    f"{e.format_message()} ({late[0]} stands after SCRIPT, so it goes to the "
                    "script: put the launcher's options before SCRIPT)", ctx) from None
            raise

    def _script_index(self, ctx: click.Context, args: list[str]) -> int | None:
        """Where SCRIPT is in ``args``: the first word that is neither an option nor an
        option's value (with ``-m MODULE``: the word after MODULE, where its arguments
        begin; a ``--`` is put there so that they are never read as launcher options)."""
        takes_value = {name for p in self.get_params(ctx) if isinstance(p, click.Option)
                       and not p.is_flag for name in p.opts}
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                return i + 1 if i + 1 < len(args) else None
            if a in ("-m", "--module") and i + 1 < len(args):
                args.insert(i + 2, "--")
                return None
            if not a.startswith("-") or a == "-":
                return i
            i += 2 if a in takes_value else 1
        return None


def _check_dgl_spelling(arg: str) -> None:
    """DGL's underscore spellings before SCRIPT: an error that names dglctl's option."""
    name = arg.split("=", 1)[0]
    if name in DGL_SPELLINGS:
        ours = DGL_SPELLINGS[name]
        raise click.UsageError(
            f"{name} is DGL's launch.py spelling: dglctl's option is {ours}" if ours else
            f"{name} is an option of DGL's launch.py that dglctl has no use for: "
            + ("set OMP_NUM_THREADS in the cluster YAML's env:" if "omp" in name else
               "hosts' workspaces are set in the cluster YAML" if "workspace" in name else
               "servers are single-threaded processes; use --num-servers"))


@click.command(cls=LaunchCommand, context_settings={"allow_interspersed_args": False})
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [ARGS]...")
@click.option("-m", "--module", default=None, metavar="MODULE",
              help="Run a module of the project (python -m MODULE) instead of SCRIPT; the "
                   "words after MODULE are its arguments.")
@click.option("--workdir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="The project folder shipped to every host (checksummed, only changes "
                   "copied; .dglctlignore in gitignore syntax leaves files out); the trainers "
                   "run in its copy [default: SCRIPT's folder; with -m, this folder].")
@click.option("--cluster", "cluster_path", type=click.Path(path_type=Path), default=None,
              help="Cluster YAML [default: the local cluster shipped with dglctl (as "
                   "configs/local.yaml): two machines on 127.0.0.1 and 127.0.0.2, no SSH]")
@click.option("--part-config", type=click.Path(path_type=Path), required=True,
              help="The partition's JSON (from 'dglctl partition').")
@click.option("--num-servers", type=int, default=None, help="Servers per host.")
@click.option("--num-trainers", type=int, default=None, help="Trainers per host.")
@click.option("--num-samplers", type=int, default=None, help="Sampler processes per trainer.")
@click.option("--num-gpus", type=int, default=None, metavar="N",
              help="GPUs per host for the trainers: trainer k of a host gets cuda:k "
                   "(DGLCTL_DEVICE; runtime.device()), preflight checks each host has N, "
                   "and trainers per host default to N. [default: the cluster YAML's "
                   "gpus_per_host, else 0: CPU trainers]")
@click.option("--feature-cache-gb", type=float, default=None, metavar="GB",
              help="Each trainer keeps copies of the other machines' feature rows its batches "
                   "read most, up to GB (checked against every write of them); the epoch "
                   "line of the examples gives the hit rate. [default: the cluster YAML's "
                   "feature_cache_gb, else 0: none]")
@click.option("--port-base", type=int, default=None, help="First server port on each host.")
@click.option("--max-restarts", type=int, default=None, metavar="N",
              help="Start the trainers again, up to N times, when one fails (non-zero exit, "
                   "signal, OOM kill); the servers and their loaded graph are kept, the "
                   "trainers get TORCHELASTIC_RESTART_COUNT. [default: the cluster YAML's "
                   "max_restarts, else 0]")
@click.option("--ip-config", type=click.Path(path_type=Path), default=None,
              help="Take the hosts from a DGL ip_config.txt instead of the cluster file.")
@click.option("--slurm", is_flag=True,
              help="Run on the nodes of the Slurm allocation this shell is in (salloc, "
                   "sbatch): processes start as job steps (srun), no SSH; data addresses are "
                   "the nodes' NodeAddr, trainers per node --ntasks-per-node. Other settings "
                   "from a --cluster YAML with 'transport: slurm'. [default: on when "
                   "SLURM_JOB_ID is set and neither --cluster nor --ip-config is given]")
@click.option("--detach", is_flag=True,
              help="Return once the job runs, supervised (restarts, end state) by a "
                   "launcher in the background; follow with status/logs.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (every process: host, role, rank, argv, env, ports) and "
                   "exit, without contacting any host.")
@click.option("--json", "json_mode", is_flag=True,
              help="With --dry-run: the plan as JSON; with --detach: the job id as JSON.")
@click.pass_obj
def launch(app: Any, script_args: tuple[str, ...], module: str | None, workdir: Path | None,
           cluster_path: Path | None,
           part_config: Path, num_servers: int | None, num_trainers: int | None,
           num_samplers: int | None, num_gpus: int | None, feature_cache_gb: float | None,
           port_base: int | None, max_restarts: int | None,
           ip_config: Path | None, slurm: bool,
           detach: bool, dry_run: bool, json_mode: bool) -> None:
    """Run SCRIPT on every host of the cluster: servers, trainers, samplers, supervised.

    \b
    Steps: preflight every host (reachable, same Python and dglctl, ports, disk), copy each
    host its part, the configs and the project (--workdir; skipping unchanged files, verified
    by checksum),
    start servers and wait until they answer, start trainers (torch.distributed env), stream
    their output as [host role rank] lines. When any process fails, the whole job is stopped
    on every host and the root cause is printed; Ctrl-C does the same. --dry-run prints what
    would start (with the configured port base; the job token is never printed).

    \b
    Launcher options come before SCRIPT; everything after SCRIPT goes to the script:
      dglctl launch --part-config parts/demo.json train.py --epochs 5
    (The older order, SCRIPT OPTIONS -- ARGS, still works.)
    """
    from ..config import cluster_from_ip_config, load_cluster_config
    from ..jobs.detach import supervised_job
    from ..jobs.launcher import Launcher, LaunchOptions

    # The background launcher a detached launch started: it supervises the job as a
    # foreground launch does, its output going to the job's log.
    supervising = supervised_job()
    if supervising is not None:
        detach = json_mode = False
    if json_mode and not (dry_run or detach):
        raise ConfigError("--json goes with --dry-run or --detach",
                          hint="a supervised launch streams its logs as text")
    script = None
    if module is None:
        if not script_args:
            raise click.UsageError("give SCRIPT (or -m MODULE)")
        script, script_args = Path(script_args[0]), script_args[1:]
    if script_args[:1] == ("--",):
        script_args = script_args[1:]  # SCRIPT -- ARGS: the separator is not the script's
    display = app.display(json_mode)
    if ip_config is not None:
        if slurm:
            raise ConfigError("--slurm and --ip-config both name the hosts: give one",
                              hint="inside an allocation, --slurm takes its nodes")
        base = load_cluster_config(cluster_path) if cluster_path else None
        cluster = cluster_from_ip_config(ip_config, base)
    else:
        cluster = resolve_cluster(cluster_path, slurm, display, detach=detach)
    cluster = cluster.with_overrides(
        servers_per_host=num_servers, trainers_per_host=num_trainers,
        samplers_per_trainer=num_samplers, gpus_per_host=num_gpus, port_base=port_base,
        max_restarts=max_restarts, feature_cache_gb=feature_cache_gb)
    if detach and not dry_run:
        _detach(display, app.argv, cluster.timeout)
        return
    opts = LaunchOptions(script=script, script_args=tuple(script_args), part_config=part_config,
                         detach=detach, port_base_explicit=port_base is not None,
                         module=module, workdir=workdir)
    launcher = Launcher(cluster, opts, display, job_id=supervising)
    if dry_run:
        plan = launcher.dry_run()
        # How each host would be reached, as 'ssh -G' resolves it (no connection is made).
        ssh = {t.host.name: r for t in launcher.transports if (r := t.resolved()) is not None}
        display.json({**plan.describe(),
                      "ssh": {n: {"connect": r.describe(), **r.options} for n, r in ssh.items()}})
        render_plan(plan, display)
        for name, r in ssh.items():
            display.result(f"ssh {name}: {r.describe()}")
        return
    code = launcher.run()
    if code:
        raise click.exceptions.Exit(code)


def _detach(display: Display, argv: tuple[str, ...], timeout: float) -> None:
    """Start this launch again in the background as the job's supervisor, show its steps
    until the job runs, then say how to follow it (or fail with the launch's error)."""
    import sys

    from ..jobs.detach import start_detached, supervisor_log

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    code, m = start_detached(argv, echo, timeout=3 * timeout)
    if code:
        raise click.exceptions.Exit(code)
    assert m is not None  # it runs: its record is there
    log = supervisor_log(m.job_id)
    display.json({"job": m.job_id, "state": str(m.state), "hosts": [h.name for h in m.hosts],
                  "processes": len(m.procs), "supervisor": m.launcher, "log": str(log)})
    display.result(f"job {m.job_id} {m.state} (detached): supervised in the background by pid "
                   f"{m.launcher.get('pid')} (its output: {log}); follow it with 'dglctl logs "
                   f"{m.job_id} -f', end it with 'dglctl stop {m.job_id}'")


def resolve_cluster(cluster_path: Path | None, slurm: bool, display: Display, *,
                    detach: bool = False, what: str = "launching") -> ClusterConfig:
    """The cluster a command runs on: ``--cluster``'s YAML, the Slurm allocation's nodes
    (``--slurm``, a YAML of ``transport: slurm``, or this shell inside an allocation with no
    ``--cluster``: said in a note), else the local default."""
    from ..config import load_cluster_config

    base = load_cluster_config(cluster_path) if cluster_path else None
    if not slurm and base is None and os.environ.get("SLURM_JOB_ID"):
        slurm = True
        display.info(f"note: inside Slurm job {os.environ['SLURM_JOB_ID']}: {what} on its "
                     "nodes through srun (--slurm); give --cluster for another cluster")
    if slurm or (base is not None and base.transport == "slurm"):
        return slurm_cluster(base, detach)
    return base or load_cluster_config(DEFAULT_CLUSTER)


def slurm_cluster(base: ClusterConfig | None, detach: bool) -> ClusterConfig:
    """The cluster of this shell's Slurm allocation, with ``base``'s other settings (a YAML
    of ``transport: slurm``); a clear error outside an allocation or with another transport."""
    from ..hosts.slurm_alloc import cluster_from_allocation, current_allocation

    if base is not None and base.transport != "slurm":
        raise ConfigError(f"--slurm: {base.path} is a cluster of transport {base.transport} "
                          "(its hosts are listed there)",
                          hint="drop --slurm to use it, or set 'transport: slurm' and remove "
                               "its hosts to take the allocation's nodes")
    if detach:
        raise ConfigError("--detach cannot go with --slurm: a job step ends with the srun "
                          "that started it, so the job lives as long as its launcher",
                          hint="to run unattended, submit it: 'dglctl slurm-script ... > "
                               "job.sh; sbatch job.sh'")
    return cluster_from_allocation(current_allocation(), base)


def render_plan(plan: JobPlan, display: Display) -> None:
    """The plan for people: hosts, ports, then each process with its argv and env."""
    out = display.result
    learnt = "<learnt at preflight>"  # FROM_HOST: a name only the cluster resolves
    out(f"job {plan.job_id} (dry run: no host contacted, nothing started)")
    out(f"ports: servers from {plan.port_base}, MASTER_ADDR {plan.master_addr or learnt} "
        f"MASTER_PORT {plan.master_port}, world size {plan.world_size}")
    out("hosts:")
    for h in plan.hosts:
        data = h.data_address or "the address its SSH connection arrives at, learnt at preflight"
        out(f"  {h.name}  {h.address} (data {data})  workspace {h.workspace}  "
            f"{len(h.files)} file(s), {h.bytes_needed / 1e6:.1f} MB")
    out("processes:")
    for p in plan.procs:
        port = f"  port {p.port}" if p.port is not None else ""
        out(f"  {p.label} {p.name}{port}")
        out(f"      argv: {shlex.join(p.argv)}")
        out(f"      cwd:  {p.cwd}")
        env = p.public_env()
        out("      env:  " + "\n            ".join(f"{k}={v}" for k, v in sorted(env.items())))


COMMANDS = [launch]
