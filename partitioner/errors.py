"""The partitioner's exception hierarchy: every error a user can cause names what to fix."""

from __future__ import annotations

# The exit codes of every command of the project, here in the lowest package; the runtime's
# and dglctl's errors import them (dglctl adds the codes of ending on a signal).
EXIT_FAILURE = 1  # a run failed: a job, a host, a peer, or the machine (e.g. the disk is full)
EXIT_USAGE = 2  # bad input, options or configuration: the user can fix them
EXIT_INTEGRITY = 3  # a file does not match its recorded checksum or size
EXIT_INTERNAL = 70  # a bug (EX_SOFTWARE)


class PartitionerError(Exception):
    """Root of every error the partitioner raises on purpose.

    ``hint`` is an optional sentence telling the user what to do about it; ``exit_code`` is
    what the CLI exits with (the same three attributes as the runtime's and dglctl's errors).
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class PartitionInputError(PartitionerError):
    """The input graph is unreadable or inconsistent (names the file and, for text, the line)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message, hint)
        self.path = path
        self.line = line


class PartitionOptionError(PartitionerError):
    """An option is out of range for this graph (e.g. more parts than nodes)."""


class PartitionFormatError(PartitionerError):
    """A partition folder or its JSON config is missing, malformed or of an unknown version."""


class ChecksumError(PartitionFormatError):
    """A partition file does not match the size or checksum recorded in the config."""

    exit_code = EXIT_INTEGRITY


class OutEdgesMissing(PartitionFormatError):
    """The partition was written without out-edges (``--no-out-edges``) and an operation needs
    them (``edge_dir="out"`` sampling, ``out_degrees``)."""


class OutputExistsError(PartitionerError):
    """The output already exists and --overwrite was not given."""


class OutputWriteError(PartitionerError):
    """The output could not be written: the disk is full or a quota is exceeded.

    Names the output path and, in ``needed``, the bytes it needed at least (``None`` when
    unknown). Whoever raises it has removed the partial output already.
    """

    exit_code = EXIT_FAILURE

    def __init__(
        self, message: str, hint: str | None = None, *, path: str | None = None,
        needed: int | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.path = path
        self.needed = needed


class PartitionMemoryError(PartitionerError):
    """The graph cannot be partitioned within the memory limit (partitioner.memory_plan)."""


class BackendUnavailable(PartitionerError):
    """A partitioning backend (METIS, KaMinPar) could not be loaded."""
