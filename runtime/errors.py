"""The runtime's exception hierarchy: each error names the peer, the value and what to do.

Every error carries ``message``, ``hint`` and ``exit_code`` (the same three attributes as
``dglctl.errors.DglctlError`` and ``partitioner.errors.PartitionerError``, which the CLI reads).
Errors cross the wire as ``{type, message, hint}`` and are raised again as the same class
(:func:`from_wire`).
"""

from __future__ import annotations

# The project's exit codes live in the lowest package; re-exported for the runtime's users.
from partitioner.errors import EXIT_FAILURE as EXIT_FAILURE
from partitioner.errors import EXIT_INTERNAL as EXIT_INTERNAL
from partitioner.errors import EXIT_USAGE as EXIT_USAGE
from partitioner.errors import PartitionerError


class DistError(Exception):
    """Root of every error the runtime raises on purpose.

    ``permanent``: the same attempt would fail the same way again (a setting that is wrong
    for this job, not a fault): recorded with the exception (:mod:`runtime.error_file`), so
    the launcher ends the job instead of spending a restart on it."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str | None = None, *,
                 permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.permanent = permanent

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class EnvError(DistError):
    """The launcher/runtime environment contract is missing a variable or holds a bad value."""

    exit_code = EXIT_USAGE


class IpConfigError(DistError):
    """ip_config.txt is missing or malformed (names the file and line)."""

    exit_code = EXIT_USAGE


class HandshakeError(DistError):
    """A peer refused the connection: wrong job token or runtime version."""


class ProtocolError(DistError):
    """A message that is not one of the runtime's, or is malformed."""


class PeerTimeout(DistError):
    """A peer did not answer in time: it is dead, overloaded or unreachable."""


class RemoteError(DistError):
    """A server answered a request with an error that is not one of the runtime's own."""


class ShmError(DistError):
    """Shared memory of a job is missing or inconsistent."""


class CheckpointError(DistError):
    """A checkpoint cannot be written or restored: a file that fails its checksum, or a folder
    from another job or model (names the folder, the file and what differs)."""


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    subs: list[type] = cls.__subclasses__()
    for sub in subs:
        out += _subclasses(sub)
    return out


def from_wire(type_name: str, message: str, hint: str | None) -> Exception:
    """The error a peer reported, as the same class (the runtime's and the partitioner's own
    errors; a RemoteError for any other type)."""
    for cls in _subclasses(DistError) + _subclasses(PartitionerError):
        if cls.__name__ == type_name:
            try:
                return cls(message, hint=hint)
            except TypeError:  # a subclass with its own signature
                break
    return RemoteError(message, hint)
