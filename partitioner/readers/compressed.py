"""Opening text inputs that may be gzip- or zstd-compressed, and refusing binary ones by name.

The compression is told from the file's first bytes, not its name, so ``edges.txt`` that is
really gzip reads as well as ``edges.txt.gz``. Every opener sniffs the first block of the
(decompressed) text: NUL bytes, bytes that are not UTF-8, or the magic of a known binary
format make a PartitionInputError naming the file, never a garbled line quoted as "line 2".
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zlib
from typing import Any, BinaryIO, TextIO, cast

from ..errors import PartitionInputError

COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SNIFF_BYTES = 1 << 16
_ENCODING = "utf-8-sig"
# What a sample that is not text most likely is, by its first bytes (after decompression).
_BINARY_MAGIC = (
    (b"PK\x03\x04", "a zip archive (an .npz? use --format npz or --format scipy)"),
    (b"PAR1", "a Parquet file (use --format parquet)"),
    (b"\x93NUMPY", "a NumPy .npy array (pass it as --node-data NAME=FILE.npy)"),
    (_GZIP_MAGIC, "gzip data inside gzip"),
    (_ZSTD_MAGIC, "zstd data inside compressed data"),
    (b"BZh91AY&SY", "bzip2-compressed (decompress it, or recompress with gzip or zstd)"),
    (b"\xfd7zXZ\x00", "xz-compressed (decompress it, or recompress with gzip or zstd)"),
    (b"\x89HDF", "an HDF5 file"),
)


def strip_compression_suffix(name: str) -> str:
    """``name`` without a trailing ``.gz`` / ``.zst`` / ``.zstd`` (``edges.txt.gz`` ->
    ``edges.txt``); other names are returned unchanged."""
    lowered = name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        if lowered.endswith(suffix):
            return name[: -len(suffix)]
    return name


def compression_of(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"zstd"`` or ``None`` (not compressed), from the file's magic bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise PartitionInputError(f"cannot read: {exc.strerror or exc}",
                                  path=os.fspath(path)) from exc
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    return None


def _zstd_reader(raw: BinaryIO, path: str) -> tuple[BinaryIO, tuple[type[BaseException], ...]]:
    """A zstd decompressing reader over ``raw`` and the exception classes it raises."""
    try:
        import zstandard
    except ImportError as exc:  # a core dependency: only a broken environment lacks it
        raise PartitionInputError(
            "is zstd-compressed but the zstandard package is not installed", path=path,
            hint="pip install zstandard (a dependency of dglctl), or decompress it: zstd -d",
        ) from exc
    # read_across_frames: files written by `zstd` in several frames read to their end.
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return reader, (zstandard.ZstdError,)


class _Decompressed(io.RawIOBase):
    """A decompressing stream whose codec errors become PartitionInputError naming the file."""

    def __init__(self, inner: BinaryIO | gzip.GzipFile, raw: BinaryIO, path: str, kind: str,
                 codec_errors: tuple[type[BaseException], ...]) -> None:
        self._inner, self._raw, self._path, self._kind = inner, raw, path, kind
        self._errors: tuple[type[BaseException], ...] = (
            EOFError, OSError, zlib.error, *codec_errors)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inner.read(len(buffer))
        except self._errors as exc:
            raise _corrupt(self._path, self._kind, exc) from exc
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._raw.close()
            super().close()


def _corrupt(path: str, kind: str, exc: BaseException) -> PartitionInputError:
    return PartitionInputError(
        f"{kind} data is corrupt or truncated ({exc})", path=path,
        hint=f"check the file: {'gzip -t' if kind == 'gzip' else 'zstd -t'} {path}",
    )


def open_binary(path: str | os.PathLike) -> tuple[io.BufferedReader, str | None]:
    """The file's bytes, decompressed when gzip or zstd, and the compression found."""
    path = os.fspath(path)
    kind = compression_of(path)
    # A buffering size > 1 in "rb" mode always gives a BufferedReader; typeshed's open() says
    # so only for buffering -1 or 1.
    raw = cast(io.BufferedReader, open(path, "rb", buffering=_SNIFF_BYTES))
    if kind is None:
        return raw, None
    try:
        if kind == "gzip":
            inner: BinaryIO | gzip.GzipFile = gzip.GzipFile(fileobj=raw, mode="rb")
            codec_errors: tuple[type[BaseException], ...] = ()
        else:
            inner, codec_errors = _zstd_reader(raw, path)
    except BaseException:
        raw.close()
        raise
    stream = _Decompressed(inner, raw, path, kind, codec_errors)
    return io.BufferedReader(stream, buffer_size=_SNIFF_BYTES), kind


def open_text(
    path: str | os.PathLike, *, what: str = "a text edge list", errors: str = "strict"
) -> TextIO:
    """Open ``path`` as UTF-8 text, decompressing gzip and zstd transparently.

    Raises PartitionInputError naming the file (``"not <what>: looks binary/compressed"``)
    when the first 64 KiB of the decompressed text hold a NUL byte, invalid UTF-8 or the
    magic of a known binary format. ``errors`` is the decoding policy past that sample.
    """
    path = os.fspath(path)
    stream, kind = open_binary(path)
    try:
        reason = binary_reason(stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES])
        if reason is not None:
            via = f" after {kind} decompression" if kind else ""
            raise PartitionInputError(
                f"not {what}: looks binary/compressed{via}: {reason}", path=path,
                hint="text input is UTF-8 lines, optionally gzip- (.gz) or zstd- (.zst) "
                     "compressed; pick the matching --format for other files",
            )
        return io.TextIOWrapper(stream, encoding=_ENCODING, errors=errors)
    except BaseException:
        stream.close()
        raise


def binary_reason(sample: bytes) -> str | None:
    """Why ``sample`` (a file's first bytes) is not UTF-8 text, or ``None`` when it is."""
    for magic, what in _BINARY_MAGIC:
        if sample.startswith(magic):
            return what
    if b"\x00" in sample:
        at = sample.index(b"\x00")
        return f"NUL byte at offset {at} (a binary or UTF-16 file)"
    try:
        # final=False: a multi-byte character cut at the end of the sample is fine.
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError as exc:
        return f"byte 0x{sample[exc.start]:02x} at offset {exc.start} is not UTF-8"
    return None
