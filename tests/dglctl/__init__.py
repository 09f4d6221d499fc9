"""Tests of dglctl: the CLI, the launcher, the agent and the transports."""

from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"  # the launcher tests' training scripts
