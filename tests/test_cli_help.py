"""``--help`` of every command: each ``dglctl`` command (found by walking the click group, so a
command added later is covered without a new test) and the two ``python -m`` entry points."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dglctl.cli import cli
from testing.timeouts import TIMEOUT

REPO = Path(__file__).resolve().parents[1]


def commands(group: click.Command = cli,
             path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group`` (itself first) with the words that invoke it."""
    yield path, group
    if isinstance(group, click.Group):
        ctx = click.Context(group, info_name=" ".join(("dglctl", *path)))
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None and not command.hidden:
                yield from commands(command, (*path, name))


COMMANDS = list(commands())


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.unit
def test_the_walk_finds_nested_commands():
    @click.group()
    def top():
        """Top."""

    @top.group()
    def sub():
        """Sub."""

    @sub.command()
    def leaf():
        """Leaf."""

    assert [p for p, _ in commands(top)] == [(), ("sub",), ("sub", "leaf")]
    assert len(COMMANDS) > 1, "dglctl has subcommands"


@pytest.mark.unit
@pytest.mark.parametrize(("path", "command"), COMMANDS,
                         ids=[" ".join(p) or "dglctl" for p, _ in COMMANDS])
def test_help_of_every_command(path, command):
    first = next(iter((command.help or "").strip().splitlines()), "")
    assert first, f"dglctl {' '.join(path)}: the command has no docstring"
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="dglctl",
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert _words(first) in _words(result.output), result.output
    assert result.output.startswith(f"Usage: {' '.join(('dglctl', *path))} "), result.output


@pytest.mark.multiprocess
@pytest.mark.parametrize("module", ["runtime.server", "dglctl.agent"])
def test_help_of_python_m_entry_points(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=6 * TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout
