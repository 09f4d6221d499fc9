"""``dglctl`` as the tests run it: in this process, its output captured."""

from __future__ import annotations

from typing import Any


def run_cli(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """``dglctl ARGV`` in this process: its exit code, stdout and stderr (``capsys``: pytest's
    capture fixture, read and reset)."""
    from dglctl.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err
