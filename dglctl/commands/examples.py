"""The ``examples`` command: where the installed example scripts and default cluster lie."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .launch import DEFAULT_CLUSTER

# Package data (dglctl/data): the repo's examples/ and configs/local.yaml link to these files.
DATA = DEFAULT_CLUSTER.parent


def example_files() -> list[Path]:
    """The example training scripts installed with dglctl, then the local default cluster."""
    return [*sorted(DATA.glob("train_*.py")), DEFAULT_CLUSTER]


@click.command()
@click.option("--json", "json_mode", is_flag=True, help="The paths as a JSON list.")
@click.pass_obj
def examples(app: Any, json_mode: bool) -> None:
    """Print where the example training scripts and the local default cluster are installed.

    \b
    One path a line: the scripts (train_dist.py is the demo's GraphSAGE), then the cluster
    file 'launch' uses without --cluster. Copy one to start your own:
      cp "$(dglctl examples | grep /train_dist.py)" my_train.py
    """
    display = app.display(json_mode)
    paths = [str(p) for p in example_files()]
    display.json(paths)
    display.result("\n".join(paths))


COMMANDS = [examples]
