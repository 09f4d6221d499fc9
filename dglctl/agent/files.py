"""The host agent's file commands (``checksums``, ``prune``): what the launcher asks of a
host's copies of the shards and of the project. A project's copy is pruned by a record of
what the launcher shipped into it, so what a job wrote there stays."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .protocol import FileStat
from .workspace import read_json, write_private


def cmd_checksums(args: argparse.Namespace) -> dict[str, Any]:
    """Size and xxh3-128 of each listed file (relative to --root); null when missing."""
    from partitioner.format import file_checksum

    root = Path(os.path.expanduser(args.root))
    out: dict[str, Any] = {}
    for rel in json.loads(args.files):
        p = root / rel
        if not p.is_file():
            out[rel] = None
        else:
            size = p.stat().st_size
            out[rel] = FileStat(size, None if args.sizes_only else file_checksum(p)).to_json()
    return out


def cmd_prune(args: argparse.Namespace) -> dict[str, Any]:
    """Remove the files below --root that the last launch shipped (the JSON list in --record)
    and --keep no longer lists (a project's copy: files deleted there go here too), and the
    folders that leaves empty; then record --keep as what is shipped now. A file the launcher
    never shipped (what a job wrote into the copy: checkpoints, results, logs) is never
    touched, and without a record (a copy no launch has recorded yet) nothing is removed.
    Links are removed, never followed."""
    root = Path(os.path.expanduser(args.root))
    record = Path(os.path.expanduser(args.record))
    keep = sorted(set(json.loads(args.keep)))
    removed: list[str] = []
    shipped = read_json(record)
    if root.is_dir() and not root.is_symlink() and isinstance(shipped, list):
        for rel in sorted(set(map(str, shipped)) - set(keep)):
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                continue  # not a path below root: no record of ours
            path = root / rel
            if not (path.is_symlink() or path.is_file()):
                continue  # gone already, or a folder a job made in its place
            path.unlink()  # the link, never what it points to
            removed.append(rel)
            for folder in path.parents:
                if folder == root or root not in folder.parents:
                    break
                with contextlib.suppress(OSError):  # not empty: something else is there
                    folder.rmdir()
    record.parent.mkdir(parents=True, exist_ok=True)
    write_private(record, json.dumps(keep))
    return {"removed": removed}
