"""What a copy sent: a local file read once, its bytes hashed as they are handed on.

The launcher verifies a copy on the host against the checksum of the bytes it sent, never
against a second read of the local file: a file that grows or changes while it is copied (the
launcher's own log, a checkpoint being written, a download) then arrives exactly as it was
read, and the launch can say which files changed instead of failing on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import xxhash

CHUNK = 1 << 20


@dataclass(frozen=True)
class Sent:
    """The bytes one copy sent: how many, and their xxh3-128 (as the partition format's)."""

    size: int
    xxh3_128: str

    @classmethod
    def of(cls, data: bytes) -> Sent:
        """What sending ``data`` sends."""
        return cls(len(data), xxhash.xxh3_128_hexdigest(data))


class HashedRead:
    """One read of a local file, in chunks, hashing each chunk as it is handed on."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._digest = xxhash.xxh3_128()
        self._size = 0

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The file's bytes, read once up to the end it has at that moment."""
        with open(self.source, "rb") as f:
            while chunk := f.read(size):
                self._digest.update(chunk)
                self._size += len(chunk)
                yield chunk

    def sent(self) -> Sent:
        """What the chunks handed on so far add up to."""
        return Sent(self._size, self._digest.hexdigest())
