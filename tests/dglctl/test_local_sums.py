"""The record of the partition files already found good (``dglctl.jobs.local_sums``): a file
unchanged since is not read again, any change to it is seen (no processes)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import partitioner.format
from dglctl.errors import IntegrityError
from dglctl.jobs import local_sums
from testing.wait import wait_until

pytestmark = pytest.mark.unit
SHARD = "part0/node_feat/0_feat.npy"


@pytest.fixture
def files(tmp_path, home, monkeypatch) -> tuple[Path, dict[str, tuple[int, str]]]:
    """A folder of three files and their (size, xxh3_128), once the files' timestamps are
    older than a short racy window (so that a check may record them)."""
    monkeypatch.setattr(local_sums, "RACY_SECONDS", 0.05)
    root = tmp_path / "parts"
    for i, rel in enumerate([SHARD, "part0/graph/0_indptr.npy", "orig_nids/0__N.npy"]):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(os.urandom(1000 + i))
    rels = [p.relative_to(root).as_posix() for p in root.rglob("*.npy")]
    newest = max(max((root / r).stat().st_mtime_ns, (root / r).stat().st_ctime_ns)
                 for r in rels)
    wait_until(lambda: time.time_ns() - newest > 0.1e9, "the clock 0.1 s past the newest file",
               interval=0.01)
    return root, {r: ((root / r).stat().st_size, partitioner.format.file_checksum(root / r))
                  for r in rels}


def corrupt_one_byte(path: Path) -> None:
    """Flip the last byte of ``path`` and set its mtime back (size and mtime as before)."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_recorded_file_is_not_read_again(files, monkeypatch):
    root, expected = files
    hashed: list[str] = []
    real = partitioner.format.file_checksum

    def counting(path):
        hashed.append(Path(path).relative_to(root).as_posix())
        return real(path)

    monkeypatch.setattr(partitioner.format, "file_checksum", counting)
    local_sums.check_local(root, list(expected), expected)
    assert sorted(hashed) == sorted(expected)
    hashed.clear()
    local_sums.check_local(root, list(expected), expected)
    assert hashed == []
    # A rewrite with the same bytes changes ctime: that file (only) is hashed again.
    (root / SHARD).write_bytes((root / SHARD).read_bytes())
    local_sums.check_local(root, list(expected), expected)
    assert hashed == [SHARD]


def test_a_byte_changed_behind_a_restored_mtime_is_seen(files):
    root, expected = files
    local_sums.check_local(root, list(expected), expected)  # recorded
    corrupt_one_byte(root / SHARD)
    with pytest.raises(IntegrityError) as e:
        local_sums.check_local(root, list(expected), expected)
    assert e.value.message == (f"{root / SHARD}: its bytes do not match the part config's "
                               "checksum (the file is corrupted, or something is rewriting "
                               "the partition)")
    assert f"'dglctl inspect {root}'" in (e.value.hint or "")
    with pytest.raises(IntegrityError):  # the record of the good bytes is gone with them
        local_sums.check_local(root, list(expected), expected)


def test_a_file_just_written_is_not_recorded(files, monkeypatch):
    root, expected = files
    monkeypatch.setattr(local_sums, "RACY_SECONDS", 3600.0)  # every file is "just written"
    local_sums.check_local(root, list(expected), expected)
    corrupt_one_byte(root / SHARD)
    with pytest.raises(IntegrityError, match="its bytes do not match"):
        local_sums.check_local(root, list(expected), expected)


def test_a_file_of_another_size_is_named(files):
    root, expected = files
    with open(root / SHARD, "ab") as f:
        f.write(b"x")
    with pytest.raises(IntegrityError) as e:
        local_sums.check_local(root, list(expected), expected)
    size = expected[SHARD][0]
    assert f"{root / SHARD}: {size + 1} bytes, the part config records {size}" in e.value.message


def test_an_unwritable_home_only_costs_a_hash(files, home, monkeypatch):
    root, expected = files
    home.mkdir(parents=True, exist_ok=True)
    (home / "verified").write_text("not a folder")
    local_sums.check_local(root, list(expected), expected)
    corrupt_one_byte(root / SHARD)
    with pytest.raises(IntegrityError):
        local_sums.check_local(root, list(expected), expected)
