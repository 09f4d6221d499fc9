"""Node-to-part assignments from outside: read one to partition by it, write the one a run made.

An assignment gives the part of every node, in the order of the input's node ids (the node
types of a heterograph one after the other, in the graph's type order: the ids the
partitioner's METIS call sees). Any partitioner can make one (dKaMinPar, ParHIP, XtraPuLP, a
previous run's ``--save-assignment``); ``partition --assignment FILE`` then uses it as is, so
two runs with the same assignment write the same parts.

Files: ``.npy`` (a 1-D integer array), or text: one part id per line (blank lines and ``#``
comments are skipped). A file is read as ``.npy`` when it starts with numpy's magic, whatever
its name (so a ``.txt`` an older ``--save-assignment`` filled with ``.npy`` bytes still reads);
one is written as ``.npy`` only under a ``.npy`` name, as text under any other.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import OutputWriteError, PartitionInputError

METHOD = "assignment"  # the method recorded in the config of a run given one
NPY_MAGIC = b"\x93NUMPY"  # how every .npy file starts (numpy.lib.format.MAGIC_PREFIX)
# Part ids turned into text per block of this many: the block's digit matrix (8 bytes per
# digit of the widest id, a node) stays a few tens of MiB however large the graph.
_TEXT_BLOCK = 1 << 20


def given_assignment(given: str | Path | np.ndarray, num_nodes: int,
                     num_parts: int) -> np.ndarray:
    """The part (int64) of each of ``num_nodes`` nodes: ``given`` as an array, or read from
    the file it names (:func:`read_assignment`), checked alike."""
    if isinstance(given, (str, Path)):
        return read_assignment(given, num_nodes, num_parts)
    part = np.asarray(given)
    if part.ndim != 1 or part.dtype.kind not in "iu":
        raise PartitionInputError(f"the assignment must be a 1-D integer array, got shape "
                                  f"{part.shape} of {part.dtype}")
    return _checked(part.astype(np.int64), None, "the assignment array", num_nodes, num_parts)


def read_assignment(path: str | Path, num_nodes: int, num_parts: int) -> np.ndarray:
    """The part (int64) of each of ``num_nodes`` nodes from ``path``.

    Raises:
        PartitionInputError: the file cannot be read, holds another count of nodes, or a part
            outside ``0..num_parts-1`` (naming the file, the line or index, and the value), or
            leaves a part empty.
    """
    path = Path(path)
    if _starts_with_npy_magic(path):
        try:
            raw = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise PartitionInputError(f"cannot read the assignment: {e}", path=str(path)) from None
        if raw.ndim != 1 or raw.dtype.kind not in "iu":
            raise PartitionInputError(
                f"the assignment must be a 1-D integer array, got shape {raw.shape} of "
                f"{raw.dtype}", path=str(path))
        return _checked(np.asarray(raw, dtype=np.int64), None, str(path), num_nodes, num_parts)
    part, lines = _read_text(path)
    return _checked(part, lines, str(path), num_nodes, num_parts)


def _starts_with_npy_magic(path: Path) -> bool:
    """Whether ``path`` begins as a ``.npy`` file does (a file that cannot be opened is left to
    the text reader, whose message names it)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(NPY_MAGIC)) == NPY_MAGIC
    except OSError:
        return False


def _checked(part: np.ndarray, lines: np.ndarray | None, source: str, num_nodes: int,
             num_parts: int) -> np.ndarray:
    """``part`` once its length, range and every part's nodes are checked (``lines``: the
    text line of each entry, for the message)."""
    if len(part) != num_nodes:
        raise PartitionInputError(
            f"the assignment gives {len(part):,} parts, the graph has {num_nodes:,} nodes",
            path=source, hint="one part id per node, in the input's node id order")
    bad = np.flatnonzero((part < 0) | (part >= num_parts))
    if len(bad):
        i = int(bad[0])
        line = int(lines[i]) if lines is not None else None
        at = "" if line is not None else f" at index {i}"
        raise PartitionInputError(
            f"part {int(part[i])}{at} is not in 0..{num_parts - 1} (--num-parts {num_parts}; "
            f"{len(bad):,} such entries)", path=source, line=line)
    empty = np.flatnonzero(np.bincount(part, minlength=num_parts) == 0)
    if len(empty):
        raise PartitionInputError(
            f"the assignment leaves part {int(empty[0])} empty ({len(empty)} of {num_parts} "
            "parts have no node)", path=source,
            hint="every part needs nodes: give a smaller --num-parts")
    return part


def _read_text(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The part ids of a text file, and the line number (from 1) of each."""
    try:
        text = path.read_text()
    except OSError as e:
        raise PartitionInputError(f"cannot read the assignment: {e}", path=str(path)) from None
    except UnicodeDecodeError as e:
        raise PartitionInputError(
            f"cannot read the assignment: not a .npy file, nor text ({e})", path=str(path),
            hint="an assignment is a .npy array (numpy.save) or text, one part id per line"
        ) from None
    values: list[int] = []
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        field = line.split("#", 1)[0].strip()
        if not field:
            continue
        try:
            values.append(int(field))
        except ValueError:
            raise PartitionInputError(f"{field[:40]!r} is not a part id", path=str(path),
                                      line=number) from None
        lines.append(number)
    return np.asarray(values, dtype=np.int64), np.asarray(lines, dtype=np.int64)


def pieces_of(part: np.ndarray, trainers_per_machine: int) -> np.ndarray:
    """Trainer pieces of a given assignment: each part's nodes dealt round robin to its
    ``trainers_per_machine`` trainers, in node id order (piece ``part * t + k``)."""
    if trainers_per_machine == 1:
        return part
    order = np.argsort(part, kind="stable")
    starts = np.searchsorted(part[order], part[order])  # first position of each node's part
    rank = np.empty_like(part)
    rank[order] = np.arange(len(part)) - starts
    return part * trainers_per_machine + rank % trainers_per_machine


def write_assignment(path: str | Path, part: np.ndarray) -> None:
    """Write ``part`` (one part id per node) to ``path`` whole or not at all: as ``.npy`` when
    the name ends in ``.npy``, else as text, one part id per line (what
    :func:`read_assignment` reads back, and what other tools read as a plain column)."""
    path = Path(path)
    part = np.asarray(part, dtype=np.int64)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            if path.suffix == ".npy":
                np.save(f, part)
            else:
                for start in range(0, len(part), _TEXT_BLOCK):
                    f.write(_text_lines(part[start:start + _TEXT_BLOCK]))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputWriteError(f"{path}: cannot write the assignment: {e}",
                               path=str(path)) from None


def _text_lines(part: np.ndarray) -> bytes:
    """``part`` (int64) as ASCII decimal, one id and a newline each, built by array operations
    (``np.savetxt`` formats one row at a time in Python: 1.0 s per million ids measured here,
    against 0.1 s for this; a billion nodes would wait a quarter of an hour).

    Each id gets a row of a sign column, ``width`` right-aligned digit columns and a newline;
    the leading columns an id does not use are masked out before the rows are joined."""
    if not len(part):
        return b""
    magnitude = np.abs(part)  # part ids are far from int64's minimum, whose abs overflows
    width = len(str(int(magnitude.max())))
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)  # one per digit column
    rows = np.empty((len(part), width + 2), dtype=np.uint8)
    rows[:, 0] = ord("-")
    rows[:, 1:-1] = ord("0") + (magnitude[:, None] // powers) % 10
    rows[:, -1] = ord("\n")
    digits = 1 + (magnitude[:, None] >= powers[:-1]).sum(axis=1)  # 0 has one digit
    keep = np.ones(rows.shape, dtype=bool)
    keep[:, 1:-1] = np.arange(width) >= (width - digits)[:, None]
    keep[:, 0] = part < 0
    return rows[keep].tobytes()
