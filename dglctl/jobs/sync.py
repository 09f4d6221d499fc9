"""Copying a set of files to a host so that it ends up with exactly the given content: files
whose size and xxh3-128 already match are skipped, the others are copied (each atomically)
and then verified by checksum on the host. The shards and the project both go this way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..display import Progress
from ..errors import IntegrityError
from ..hosts.agent_client import AgentClient


def sync_files(client: AgentClient, local_root: Path, remote_rel: str, rels: Sequence[str],
               expected: Mapping[str, tuple[int, str]],
               progress: Progress | None = None) -> tuple[int, int]:
    """Make ``remote_rel`` (in the host's workspace) hold ``rels`` as ``expected`` says
    (``rel -> (size, xxh3_128)``), copying from ``local_root``; ``(files sent, bytes sent)``.
    ``progress`` hears of the bytes to send and of each file sent."""
    t = client.transport
    root = t.path(remote_rel)
    have = client.checksums(root, list(rels), sizes_only=True, timeout=60)
    todo = [r for r in rels if have.get(r) is None or have[r].size != expected[r][0]]
    # Same size is not proof: verify checksums of what is there (fast: xxh3).
    kept = [r for r in rels if r not in todo]
    if kept:
        sums = client.checksums(root, kept)
        todo += [r for r in kept if sums[r] is None or sums[r].xxh3_128 != expected[r][1]]
    sent = 0
    if progress is not None:
        progress.add_total(sum(expected[r][0] for r in todo))
    for rel in todo:
        t.put(local_root / rel, f"{remote_rel}/{rel}")
        sent += expected[rel][0]
        if progress is not None:
            progress.advance(expected[rel][0])
    if todo:
        sums = client.checksums(root, todo)
        bad = [r for r in todo if sums[r] is None or sums[r].xxh3_128 != expected[r][1]]
        if bad:
            raise IntegrityError(
                f"host {client.host.name}: {len(bad)} copied file(s) fail their checksum, e.g. "
                f"{bad[0]}",
                hint="the copy was damaged on the way or on the host's disk; launch again "
                     "to copy them again, and check the host's disk if it repeats")
    return len(todo), sent
