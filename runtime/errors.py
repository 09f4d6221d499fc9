"""The runtime's exception hierarchy: each error names the peer, the value and what to do."""

from __future__ import annotations


class DistError(Exception):
    """Root of every error the runtime raises on purpose."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class EnvError(DistError):
    """The launcher/runtime environment contract is missing a variable or holds a bad value."""


class IpConfigError(DistError):
    """ip_config.txt is missing or malformed (names the file and line)."""


class HandshakeError(DistError):
    """A peer refused the connection: wrong job token or runtime version."""


class PeerTimeout(DistError):
    """A peer did not answer in time: it is dead, overloaded or unreachable."""


class RemoteError(DistError):
    """A server answered a request with an error."""


class ShmError(DistError):
    """Shared memory of a job is missing or inconsistent."""
