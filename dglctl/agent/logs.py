"""Reading a job's logs on its host: the agent's ``logs`` and ``tail`` commands.

A read returns at most ``max_bytes`` of one log, never ending inside a UTF-8 character, with
the offset after it and the log's size, so the launcher reads on until it has everything.

Log lines carry no time (the processes write the file directly), so ``--since`` is placed by
*time marks*: each time the agent reads a log it notes ``(now, size)`` in ``NAME.logtimes``
(16 bytes, at most one a second; a log that did not grow keeps only the first and the latest
mark of its size). Every byte before a mark's size was written before its time, so a read
"since T" starts at the largest size noted at or before T (moved back to the start of its
line): it never misses a line written since T, and may include lines written between that
mark and T. The log's mtime is a mark as well (after
the last write, nothing more), and a T before the process started means the whole log.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import time
from pathlib import Path
from typing import Any

from .protocol import MARK_EVERY, LogChunk
from .workspace import job_dir

MARK = struct.Struct("<dd")  # (time.time(), size of the log in bytes)
BLOCK = 64 * 1024  # bytes read at a time when scanning back for line starts
TAIL_MAX = 1 << 20  # bytes: what ``tail`` returns at most (the end of an overlong line)


def utf8_cut(data: bytes) -> int:
    """The length of the longest prefix of ``data`` that does not end inside a UTF-8
    character (an incomplete last character is left for the next read)."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 != 0x80:  # a lead byte or ASCII: the last character starts here
            need = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else \
                4 if b >> 3 == 0b11110 else 1
            return n if back >= need else n - back
    return n  # only continuation bytes: not UTF-8 anyway, decoded with replacements


def line_start(f: Any, offset: int) -> int:
    """The offset where the line holding byte ``offset`` of the open file ``f`` begins."""
    pos = offset
    while pos > 0:
        start = max(0, pos - BLOCK)
        f.seek(start)
        i = f.read(pos - start).rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def tail_start(f: Any, size: int, lines: int) -> int:
    """The offset where the last ``lines`` lines of the open file ``f`` (``size`` bytes)
    begin; an unterminated last line counts as a line."""
    if lines <= 0 or size == 0:
        return size
    f.seek(size - 1)
    pos = size - 1 if f.read(1) == b"\n" else size  # the last line's own newline
    need = lines
    while pos > 0:
        start = max(0, pos - BLOCK)
        f.seek(start)
        block = f.read(pos - start)
        i = len(block)
        while (i := block.rfind(b"\n", 0, i)) >= 0:
            need -= 1
            if need == 0:
                return start + i + 1
        pos = start
    return 0


def _marks_path(log: Path) -> Path:
    return log.with_name(log.stem + ".logtimes")


def add_mark(log: Path, size: int) -> None:
    """Note that ``log`` had ``size`` bytes now (not within ``MARK_EVERY`` of the last mark;
    a log that did not grow keeps two marks of its size, the first and the latest; a
    read-only workspace gets none)."""
    now = time.time()  # after the size was read: every byte before it was written earlier
    if size == 0:
        return
    try:
        fd = os.open(_marks_path(log), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o600)
        end = os.fstat(fd).st_size
        end -= end % MARK.size  # a torn last mark (a full disk) is written over
        last = MARK.unpack(os.pread(fd, MARK.size, end - MARK.size)) if end else None
        if last is not None and (now - last[0] < MARK_EVERY or last[1] > size):
            return
        if last is not None and last[1] == size and end >= 2 * MARK.size and \
                MARK.unpack(os.pread(fd, MARK.size, end - 2 * MARK.size))[1] == size:
            end -= MARK.size  # the same size again: move its latest mark on
        os.pwrite(fd, MARK.pack(now, float(size)), end)
    except OSError:
        pass
    finally:
        os.close(fd)


def since_start(log: Path, f: Any, size: int, since: float) -> tuple[int, float | None]:
    """Where the lines written at or after ``since`` (a time.time()) begin in the open log
    ``f`` of ``size`` bytes, and when the log was known to end there (None: exactly at
    ``since``; 0.0: unknown), so the caller can say how much earlier the lines may be."""
    st = os.fstat(f.fileno())
    if st.st_mtime < since:
        return size, None  # nothing written since
    try:
        began = (log.with_name(log.stem + ".leader.json")).stat().st_mtime
    except OSError:
        began = None
    if began is not None and since <= began:
        return 0, None  # the process started after ``since``: all of it
    best, when = 0, None
    try:
        data = _marks_path(log).read_bytes()
    except OSError:
        data = b""
    for t, s in MARK.iter_unpack(data[:len(data) - len(data) % MARK.size]):
        if t <= since and int(s) > best:
            best, when = int(s), t
    if when is None:  # no mark before ``since``: from the start, which may be older
        return 0, began if began is not None else 0.0
    return line_start(f, min(best, size)), when


def read_log(log: Path, offset: int, max_bytes: int, *, tail: int | None = None,
             since: float | None = None) -> dict[str, Any]:
    """Up to ``max_bytes`` of ``log`` from ``offset`` (or later: from where its last ``tail``
    lines, or its lines since ``since``, begin): ``{"offset": after the text, "text",
    "size": the log's size, "start": where the text begins, "mark": see since_start}``."""
    try:
        f = open(log, "rb")  # noqa: SIM115 - closed below, after every branch
    except FileNotFoundError:
        return LogChunk(offset, "", size=0, start=offset).to_json()
    with f:
        size = os.fstat(f.fileno()).st_size
        add_mark(log, size)
        start, mark = offset, None
        if tail is not None:
            start = max(start, tail_start(f, size, tail))
        if since is not None:
            at, mark = since_start(log, f, size, since)
            start = max(start, at)
        f.seek(start)
        data = f.read(max(0, min(max(max_bytes, 4), size - start)))
    # A character cut by max_bytes, or still being written, is left for the next read (a
    # log that ends in a broken character never shows those last 1-3 bytes).
    data = data[:utf8_cut(data)]
    return LogChunk(start + len(data), data.decode("utf-8", "replace"), size=size, start=start,
                    mark=mark).to_json()


def read_logs(job: Path, offsets: dict[str, int], max_bytes: int, *, tail: int | None = None,
              since: float | None = None) -> dict[str, Any]:
    """:func:`read_log` of each named log of the job folder ``job``."""
    return {name: read_log(job / f"{name}.log", int(offset), max_bytes, tail=tail, since=since)
            for name, offset in offsets.items()}


def tail_lines(job: Path, names: list[str], lines: int) -> dict[str, list[str]]:
    """The last ``lines`` lines of each named log (of at most ``TAIL_MAX`` bytes in all)."""
    out: dict[str, list[str]] = {}
    for name in names:
        try:
            with open(job / f"{name}.log", "rb") as f:
                size = os.fstat(f.fileno()).st_size
                start = max(tail_start(f, size, lines), size - TAIL_MAX)
                f.seek(start)
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        out[name] = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        if out[name] == [""]:
            out[name] = []
    return out


def cmd_logs(args: argparse.Namespace) -> dict[str, Any]:
    """New text of each log since its offset: at most --max bytes, never a cut character;
    --tail N / --since T / --since-ago S start later: at its last N lines, at its lines since
    time T (or S seconds ago, by this host's clock), placed by time marks (see above)."""
    since = args.since if args.since_ago is None else time.time() - args.since_ago
    return read_logs(job_dir(args.workspace, args.job), json.loads(args.offsets), args.max,
                     tail=args.tail, since=since)


def cmd_tail(args: argparse.Namespace) -> dict[str, Any]:
    """The last --lines lines of each named log."""
    return tail_lines(job_dir(args.workspace, args.job), json.loads(args.names), args.lines)
