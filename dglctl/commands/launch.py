"""The ``launch`` command: run a training script on every host, or print its plan (--dry-run)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..display import Display
    from ..jobs.plan import JobPlan

# Package data, so an installed dglctl has its default (configs/local.yaml links to it).
DEFAULT_CLUSTER = Path(__file__).resolve().parents[1] / "data" / "local.yaml"


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--cluster", "cluster_path", type=click.Path(path_type=Path), default=None,
              help="Cluster YAML [default: the local cluster of configs/local.yaml: two "
                   "machines on 127.0.0.1 and 127.0.0.2, no SSH]")
@click.option("--part-config", type=click.Path(path_type=Path), required=True,
              help="The partition's JSON (from 'dglctl partition').")
@click.option("--num-servers", type=int, default=None, help="Servers per host.")
@click.option("--num-trainers", type=int, default=None, help="Trainers per host.")
@click.option("--num-samplers", type=int, default=None, help="Sampler processes per trainer.")
@click.option("--port-base", type=int, default=None, help="First server port on each host.")
@click.option("--ip-config", type=click.Path(path_type=Path), default=None,
              help="Take the hosts from a DGL ip_config.txt instead of the cluster file.")
@click.option("--detach", is_flag=True, help="Leave the job running; follow with status/logs.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (every process: host, role, rank, argv, env, ports) and "
                   "exit, without contacting any host.")
@click.option("--json", "json_mode", is_flag=True, help="With --dry-run: the plan as JSON.")
@click.pass_obj
def launch(app: Any, script: Path, script_args: tuple[str, ...], cluster_path: Path | None,
           part_config: Path, num_servers: int | None, num_trainers: int | None,
           num_samplers: int | None, port_base: int | None, ip_config: Path | None,
           detach: bool, dry_run: bool, json_mode: bool) -> None:
    """Run SCRIPT on every host of the cluster: servers, trainers, samplers, supervised.

    \b
    Steps: preflight every host (reachable, same Python and dglctl, ports, disk), copy each
    host its part, the configs and SCRIPT (skipping unchanged files, verified by checksum),
    start servers and wait until they answer, start trainers (torch.distributed env), stream
    their output as [host role rank] lines. When any process fails, the whole job is stopped
    on every host and the root cause is printed; Ctrl-C does the same. Arguments after '--'
    go to SCRIPT. --dry-run prints what would start (with the configured port base; the job
    token is never printed).
    """
    from ..config import cluster_from_ip_config, load_cluster_config
    from ..jobs.launcher import Launcher, LaunchOptions

    if json_mode and not dry_run:
        raise ConfigError("--json goes with --dry-run", hint="a launch streams its logs as text")
    if ip_config is not None:
        base = load_cluster_config(cluster_path) if cluster_path else None
        cluster = cluster_from_ip_config(ip_config, base)
    else:
        cluster = load_cluster_config(cluster_path or DEFAULT_CLUSTER)
    cluster = cluster.with_overrides(
        servers_per_host=num_servers, trainers_per_host=num_trainers,
        samplers_per_trainer=num_samplers, port_base=port_base)
    opts = LaunchOptions(script=script, script_args=tuple(script_args), part_config=part_config,
                         detach=detach, port_base_explicit=port_base is not None)
    display = app.display(json_mode)
    launcher = Launcher(cluster, opts, display)
    if dry_run:
        plan = launcher.dry_run()
        display.json(plan.describe())
        render_plan(plan, display)
        return
    code = launcher.run()
    if code:
        raise click.exceptions.Exit(code)


def render_plan(plan: JobPlan, display: Display) -> None:
    """The plan for people: hosts, ports, then each process with its argv and env."""
    out = display.result
    out(f"job {plan.job_id} (dry run: no host contacted, nothing started)")
    out(f"ports: servers from {plan.port_base}, MASTER_ADDR {plan.master_addr} MASTER_PORT "
        f"{plan.master_port}, world size {plan.world_size}")
    out("hosts:")
    for h in plan.hosts:
        out(f"  {h.name}  {h.address} (data {h.data_address})  workspace {h.workspace}  "
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
