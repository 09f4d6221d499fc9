"""The partition's files on this machine, held to the checksums their part config records
before a launch copies them or finds the hosts' copies up to date.

Hashing every byte of a big partition on every launch costs a read of the whole partition; so
each file found good is recorded (``DGLCTL_HOME/verified/``) with what ``stat`` says of it:
device, inode, size, mtime and ctime, all in nanoseconds. A later launch that finds the same
five values trusts the recorded checksum; any other value (a write, a copy or a rename over the
file) hashes the file again. ctime is in the key because a program can set mtime back
(``touch -r``, ``os.utime``, ``rsync -t``) but not ctime: a byte changed behind a restored
mtime is still seen. A file whose mtime or ctime is within ``RACY_SECONDS`` of the moment it
was hashed is not recorded (a write later in the same timestamp tick would leave its stat
unchanged: git's "racily clean" entries). A change that bypasses the file system (a disk's
bit rot) is not seen by stat: ``dglctl inspect`` always hashes every byte.

Measured on a 302 MB partition (2 parts, 22 files; 800k nodes, 12.8M directed edges) on a 2-core VM:
hashing it takes 0.17 s from the page cache and 0.31 s after its pages were dropped (about
1.8 and 1 GB/s, so a minute or more per launch for a 100 GB partition); checking it against
the record takes 0.15-0.4 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import xxhash

from ..errors import IntegrityError
from .manifest import dglctl_home

__all__ = ["MISMATCH", "RACY_SECONDS", "check_local", "mismatch_error"]

# A file changed less than this before it was hashed is hashed again next time (coarse
# timestamps: FAT's 2 s, NFS servers' own clocks).
RACY_SECONDS = 2.0
# One check at a time in this process: the hosts' copies are compared in threads, and files
# every host needs (the node maps) are then hashed once and found recorded by the others.
_LOCK = threading.Lock()


MISMATCH = "its bytes do not match the part config's checksum"


def mismatch_error(path: Path, root: Path, what: str = MISMATCH) -> IntegrityError:
    """The error for a partition file of this machine that is not what its config records."""
    return IntegrityError(
        f"{path}: {what} (the file is corrupted, or something is rewriting the partition)",
        hint=f"'dglctl inspect {root}' checks every file; re-partition (or restore the folder) "
             "if it is corrupted, or let what rewrites it finish, then launch again")


def _key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _record_path(root: Path) -> Path:
    name = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.realpath(root)))
    return dglctl_home() / "verified" / f"{name}.json"


def _read_record(path: Path) -> dict[str, list]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: every file is hashed
    return data if isinstance(data, dict) else {}


def _write_record(root: Path, path: Path, record: Mapping[str, list]) -> None:
    """Replace the record of ``root`` atomically, without the files no longer there."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    kept = {rel: v for rel, v in record.items() if (root / rel).is_file()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(tmp, path)
    except OSError:  # a read-only or full home: the next launch hashes again, nothing worse
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def check_local(root: Path, rels: Sequence[str],
                expected: Mapping[str, tuple[int, str]]) -> None:
    """Raise an IntegrityError naming the first file of ``rels`` (below ``root``) whose bytes
    are not ``expected[rel]`` (``(size, xxh3_128)``); a file the record shows unchanged since
    it was found good is not read again."""
    from partitioner.format import file_checksum

    with _LOCK:
        where = _record_path(root)
        record = _read_record(where)
        changed = False
        for rel in rels:
            path = root / rel
            size, digest = expected[rel]
            try:
                st = os.stat(path)
            except FileNotFoundError:
                raise IntegrityError(f"{path}: missing (deleted since the launch listed it)",
                                     hint="something is rewriting the partition; let it "
                                          "finish, then launch again") from None
            if st.st_size != size:
                raise mismatch_error(path, root, f"{st.st_size} bytes, the part config "
                                                 f"records {size}")
            if record.get(rel) == [*_key(st), digest]:
                continue
            started = time.time_ns()
            if file_checksum(path) != digest:
                if record.pop(rel, None) is not None or changed:
                    _write_record(root, where, record)
                raise mismatch_error(path, root)
            after = os.stat(path)
            settled = started - max(after.st_mtime_ns, after.st_ctime_ns) > RACY_SECONDS * 1e9
            if _key(after) == _key(st) and settled:
                record[rel] = [*_key(st), digest]
                changed = True
        if changed:
            _write_record(root, where, record)
