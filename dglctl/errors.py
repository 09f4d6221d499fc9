"""dglctl's exception hierarchy and exit codes: every user error says what to fix."""

from __future__ import annotations

EXIT_FAILURE = 1  # the job or command failed at run time
EXIT_USAGE = 2  # bad input, bad option, bad config: the user can fix it
EXIT_INTERNAL = 70  # a bug in dglctl (EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C


class DglctlError(Exception):
    """Root of dglctl's own errors: a one-paragraph message, an optional hint, an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(DglctlError):
    """A cluster config or option is invalid (names the file and key)."""
