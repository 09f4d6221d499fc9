"""Every dglctl error and its exit code: each one says what failed, where, and what to fix.

The CLI reads three attributes of an error, ``message``, ``hint`` and ``exit_code``; the
runtime's ``DistError`` and the partitioner's ``PartitionerError`` carry the same ones, so
``dglctl.cli.main`` renders all of them the same way (:func:`user_facing`).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

# The project's exit codes live in the lowest package (partitioner.errors); dglctl adds the
# codes of a launcher that ends on a signal.
from partitioner.errors import EXIT_FAILURE as EXIT_FAILURE
from partitioner.errors import EXIT_INTEGRITY as EXIT_INTEGRITY
from partitioner.errors import EXIT_INTERNAL as EXIT_INTERNAL
from partitioner.errors import EXIT_USAGE as EXIT_USAGE

EXIT_SIGNAL_BASE = 128  # ended on signal N: 128 + N, as shells report it
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + signal.SIGINT  # Ctrl-C: 130


class DglctlError(Exception):
    """Root of dglctl's own errors: a one-paragraph message, an optional hint, an exit code."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(DglctlError):
    """A cluster config, option or input file is invalid (names the file and key)."""


class IntegrityError(DglctlError):
    """A file does not match its recorded checksum (e.g. a shard corrupted while copying)."""

    exit_code = EXIT_INTEGRITY


class HostError(DglctlError):
    """A host-level failure: names the host and what to do."""

    exit_code = EXIT_FAILURE


class HostUnreachable(HostError):
    """The host cannot be reached over SSH."""


class AuthFailed(HostError):
    """SSH authentication was refused."""


class UnknownHostKey(HostError):
    """The host's key is not in known_hosts (or does not match it)."""


class RemoteCommandFailed(HostError):
    """A command on a host exited non-zero (names host, command, code, last lines)."""


class AllocationEnded(HostError):
    """The Slurm job a cluster runs in has ended (scancel, its time limit, a node failure):
    its nodes take no more job steps, and Slurm has ended every process of the job."""


class CopyFailed(HostError):
    """A file could not be written on a host (full disk, quota, permissions); nothing
    partial is left there."""


class PreflightError(DglctlError):
    """Problems found before anything started (all of them, one report)."""

    def __init__(self, problems: Sequence[str], hint: str | None = None) -> None:
        self.problems = list(problems)
        super().__init__(f"preflight found {len(self.problems)} problem(s):\n  "
                         + "\n  ".join(self.problems),
                         hint=hint or "fix them and launch again; nothing was started")


class JobFailed(DglctlError):
    """A process of the job failed; the message leads with the root cause."""

    exit_code = EXIT_FAILURE


class Interrupted(DglctlError):
    """The launcher received a signal (Ctrl-C, SIGTERM, SIGHUP), or 'dglctl stop' stopped the
    job it supervised; exits 128 + the signal's number (130 without one: Ctrl-C's)."""

    def __init__(self, message: str, hint: str | None = None, *,
                 signum: int = signal.SIGINT) -> None:
        super().__init__(message, hint)
        self.signum = int(signum)
        self.exit_code = EXIT_SIGNAL_BASE + self.signum


def user_facing(exc: BaseException) -> tuple[str, str | None, int] | None:
    """``(message, hint, exit_code)`` of an error a user can act on, else None (a bug).

    Any exception with ``message`` and ``hint`` attributes qualifies (dglctl's, the runtime's,
    the partitioner's); one without ``exit_code`` is a usage error (2).
    """
    message = getattr(exc, "message", None)
    if not isinstance(message, str) or not hasattr(exc, "hint"):
        return None
    code = getattr(exc, "exit_code", EXIT_USAGE)
    return message, exc.hint, code if isinstance(code, int) else EXIT_USAGE


@dataclass(frozen=True)
class HostFailure:
    """One host's failure in a fan-out: the host's name and what it raised."""

    host: str
    error: BaseException
    message: str
    hint: str | None
    exit_code: int

    @classmethod
    def of(cls, host: str, error: BaseException) -> HostFailure:
        """Describe ``error`` raised for ``host``; connection-level errors (OSError, EOF,
        paramiko's) are host failures (1), anything else unexpected is internal (70)."""
        known = user_facing(error)
        if known is not None:
            message, hint, code = known
            if not message.startswith(f"host {host}"):
                message = f"host {host}: {message}"
            return cls(host, error, message, hint, code)
        module = type(error).__module__ or ""
        connection = isinstance(error, OSError | EOFError) or module.startswith("paramiko")
        message = f"host {host}: {type(error).__name__}: {error}"
        if not connection:
            message = f"host {host}: internal error: {type(error).__name__}: {error}"
        return cls(host, error, message, None, EXIT_FAILURE if connection else EXIT_INTERNAL)


class GroupError(DglctlError):
    """Several hosts' failures in one error: every host's message (with its name) and hint;
    the exit code is the worst (highest) of theirs."""

    def __init__(self, failures: Sequence[HostFailure], total: int | None = None) -> None:
        if not failures:
            raise ValueError("a GroupError needs at least one failure")
        self.failures = list(failures)
        self.exit_code = max(f.exit_code for f in self.failures)
        hints = {f.hint for f in self.failures}
        if len(self.failures) == 1:
            only = self.failures[0]
            super().__init__(only.message, only.hint)
            return
        ended = [f.error for f in self.failures if isinstance(f.error, AllocationEnded)]
        if len(ended) == len(self.failures):
            # One cause for every host: the allocation (not a host) ended.
            super().__init__(ended[0].message, ended[0].hint)
            return
        shared = hints.pop() if len(hints) == 1 else None
        lines = []
        for f in self.failures:
            lines.append("  " + f.message.replace("\n", "\n    "))
            if f.hint and shared is None:
                lines.append(f"    hint: {f.hint}")
        of = f" of {total}" if total is not None else ""
        super().__init__(f"{len(self.failures)}{of} hosts failed:\n" + "\n".join(lines),
                         hint=shared)

    @property
    def hosts(self) -> list[str]:
        """The names of the hosts that failed, in host order."""
        return [f.host for f in self.failures]
