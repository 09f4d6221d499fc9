"""``dglctl slurm-script``: an ``sbatch`` script that runs ``dglctl launch --slurm`` on the
job's nodes. The script ends by ``exec``-ing the launcher, so the batch job's exit code is the
launch's (0, or the failed trainer's cause as an exit code) and Slurm's accounting shows it."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError

# What each option becomes in the script, in this order.
_SBATCH = (("job_name", "--job-name"), ("nodes", "--nodes"),
           ("ntasks_per_node", "--ntasks-per-node"), ("gpus_per_node", "--gpus-per-node"),
           ("time", "--time"), ("partition", "--partition"), ("account", "--account"),
           ("output", "--output"))


def sbatch_script(launch_args: list[str], *, workdir: Path, python: str,
                  options: dict[str, Any]) -> str:
    """The script's text: ``#SBATCH`` lines from ``options`` (None: not given), then
    ``cd WORKDIR`` (relative paths in ``launch_args`` keep their meaning) and ``exec`` of
    ``PYTHON -m dglctl launch --slurm LAUNCH_ARGS``."""
    lines = ["#!/bin/bash", "# Written by 'dglctl slurm-script'. Submit with: sbatch FILE"]
    for key, flag in _SBATCH:
        value = options.get(key)
        if value is not None:
            lines.append(f"#SBATCH {flag}={value}")
    lines += [
        "set -euo pipefail",
        f"cd {shlex.quote(str(workdir))}",
        "# exec: the job's exit code is the launch's (0, or why a process failed).",
        "exec " + shlex.join([python, "-m", "dglctl", "launch", "--slurm", *launch_args]),
    ]
    return "\n".join(lines) + "\n"


@click.command("slurm-script", context_settings={"ignore_unknown_options": True,
                                                  "allow_interspersed_args": False})
@click.argument("launch_args", nargs=-1, type=click.UNPROCESSED,
                metavar="[LAUNCH OPTIONS] SCRIPT [ARGS]...")
@click.option("--nodes", "-N", type=click.IntRange(1), default=2, show_default=True,
              help="Nodes: one graph part each (the --part-config needs as many parts).")
@click.option("--ntasks-per-node", type=click.IntRange(1), default=None,
              help="Trainers per node, unless the cluster YAML sets trainers_per_host "
                   "[default: Slurm's, one task a node].")
@click.option("--gpus-per-node", type=click.IntRange(0), default=None,
              help="GPUs per node (one trainer each, unless --ntasks-per-node says).")
@click.option("--time", "-t", "time_limit", default=None, metavar="TIME",
              help="Time limit, as sbatch takes it (e.g. 2:00:00, 1-00:00:00).")
@click.option("--partition", "-p", default=None, help="Slurm partition (queue).")
@click.option("--account", "-A", default=None, help="Account to charge.")
@click.option("--job-name", "-J", default="dglctl", show_default=True)
@click.option("--output", "-o", default="dglctl-%j.out", show_default=True,
              help="The job's output file (%j: the job id), relative to this folder.")
@click.option("--out", "out_path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Write the script here [default: standard output].")
def slurm_script(launch_args: tuple[str, ...], nodes: int, ntasks_per_node: int | None,
                 gpus_per_node: int | None, time_limit: str | None, partition: str | None,
                 account: str | None, job_name: str, output: str,
                 out_path: Path | None) -> None:
    """Write an sbatch script that launches a job on the nodes Slurm gives it.

    \b
    Everything after these options is what 'dglctl launch --slurm' gets:
      dglctl slurm-script -N 2 -t 1:00:00 --out job.sh \\
          --part-config parts/demo.json train.py --num-epochs 5
      sbatch job.sh
    The script runs the launcher in this folder with this Python (the nodes share their file
    system with this machine, as on most clusters); its exit code is the job's.
    """
    if not launch_args:
        raise click.UsageError("give the launch's options and SCRIPT (as 'dglctl launch' "
                               "takes them)")
    if "--detach" in launch_args:
        raise ConfigError("a batch job's launch supervises its job (its steps end with it): "
                          "drop --detach")
    options = {"job_name": job_name, "nodes": nodes, "ntasks_per_node": ntasks_per_node,
               "gpus_per_node": gpus_per_node, "time": time_limit, "partition": partition,
               "account": account, "output": output}
    for key, value in options.items():
        if isinstance(value, str) and (not value or any(c in value for c in "\n\r")):
            raise ConfigError(f"--{key.replace('_', '-')}: {value!r} cannot go on an #SBATCH "
                              "line")
    text = sbatch_script(list(launch_args), workdir=Path(os.getcwd()), python=sys.executable,
                         options=options)
    if out_path is None:
        click.echo(text, nl=False)
        return
    out_path.write_text(text)
    out_path.chmod(0o755)
    click.echo(f"wrote {out_path}; submit it with 'sbatch {out_path}'", err=True)


COMMANDS = [slurm_script]
