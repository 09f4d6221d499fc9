"""Copying a set of files to a host so that it ends up with exactly the given content: files
whose size and xxh3-128 already match are skipped, the others are copied (each atomically)
and then verified on the host against the checksum of the bytes that were sent. The shards
and the project both go this way.

A file may change on this machine between listing and copying (the launcher's log, a
checkpoint another job writes, a download): it is sent as it was read. For the shards that is
an error (the partition is corrupted, or being rewritten under the launch), and it is looked
for here before anything is compared or sent (``local_sums``: a host's good copy does not hide
a bad shard on this machine); for the project it is reported (``SyncResult.changed``,
``SyncResult.vanished``) and the launch goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..display import Progress
from ..errors import IntegrityError
from ..hosts.agent_client import AgentClient
from ..hosts.sent import Sent
from .local_sums import check_local, mismatch_error


@dataclass
class SyncResult:
    """What one ``sync_files`` did: files and bytes sent, and the files that were not as
    listed when they were read (sent as read) or had gone (left out); ``removed``: files an
    earlier launch shipped that are no longer in the project, removed from the host's copy."""

    files: int = 0
    bytes: int = 0
    changed: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def sync_files(client: AgentClient, local_root: Path, remote_rel: str, rels: Sequence[str],
               expected: Mapping[str, tuple[int, str]],
               progress: Progress | None = None, *, strict: bool = True) -> SyncResult:
    """Make ``remote_rel`` (in the host's workspace) hold ``rels`` as ``expected`` says
    (``rel -> (size, xxh3_128)``), copying from ``local_root``. ``progress`` hears of the
    bytes to send and of each file sent. ``strict``: the files here are first held to
    ``expected``, and one that is not (or is no longer when it is read to be sent) is an
    IntegrityError naming it; else a changed file is sent as read (or left out if deleted)
    and named in the result."""
    if strict:
        check_local(local_root, rels, expected)
    t = client.transport
    root = t.path(remote_rel)
    have = client.checksums(root, list(rels), sizes_only=True, timeout=60)
    todo = [r for r in rels if (h := have.get(r)) is None or h.size != expected[r][0]]
    # Same size is not proof: verify checksums of what is there (fast: xxh3).
    kept = [r for r in rels if r not in todo]
    if kept:
        sums = client.checksums(root, kept)
        todo += [r for r in kept if (c := sums[r]) is None or c.xxh3_128 != expected[r][1]]
    result = SyncResult()
    if progress is not None:
        progress.add_total(sum(expected[r][0] for r in todo))
    sent: dict[str, Sent] = {}
    for rel in todo:
        try:
            sent[rel] = t.put(local_root / rel, f"{remote_rel}/{rel}")
        except FileNotFoundError:
            if strict:
                raise IntegrityError(f"{local_root / rel}: deleted while the launch copied it",
                                     hint="something is rewriting the partition; let it "
                                          "finish, then launch again") from None
            result.vanished.append(rel)
            continue
        if (sent[rel].size, sent[rel].xxh3_128) != tuple(expected[rel]):
            if strict:
                # Good when checked just before: it changed since, as it was read.
                raise mismatch_error(local_root / rel, local_root,
                                     "the bytes read to copy it do not match the part "
                                     "config's checksum")
            result.changed.append(rel)
        result.files += 1
        result.bytes += sent[rel].size
        if progress is not None:
            progress.advance(expected[rel][0])
    if sent:
        sums = client.checksums(root, list(sent))
        bad = [r for r, s in sent.items()
               if (got := sums[r]) is None or got.xxh3_128 != s.xxh3_128]
        if bad:
            raise IntegrityError(
                f"host {client.host.name}: {len(bad)} copied file(s) fail their checksum, e.g. "
                f"{bad[0]}",
                hint="the copy was damaged on the way or on the host's disk; launch again "
                     "to copy them again, and check the host's disk if it repeats")
    return result
