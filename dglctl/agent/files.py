"""The host agent's file commands (``checksums``, ``prune``): what the launcher asks of a
host's copies of the shards and of the project."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .protocol import COPY_TEMP_PREFIX, FileStat


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
    """Remove the files under --root that --keep does not list, and the folders left empty
    (a project's copy: files deleted there go here too). Links are removed, never followed;
    copies in flight (COPY_TEMP_PREFIX folders: another host's, on a shared workspace) stay."""
    root = Path(os.path.expanduser(args.root))
    keep = set(json.loads(args.keep))
    removed: list[str] = []
    if not root.is_dir() or root.is_symlink():
        return {"removed": removed}
    for folder, dirs, names in os.walk(root, topdown=False):
        here = Path(folder)
        if any(p.startswith(COPY_TEMP_PREFIX) for p in here.relative_to(root).parts):
            continue
        for name in names:
            rel = (here / name).relative_to(root).as_posix()
            if rel not in keep:
                (here / name).unlink(missing_ok=True)
                removed.append(rel)
        for d in dirs:
            if d.startswith(COPY_TEMP_PREFIX):
                continue
            path = here / d
            with contextlib.suppress(OSError):  # not empty: something is kept below
                if path.is_symlink():
                    path.unlink()  # the link, never what it points to
                else:
                    path.rmdir()
    return {"removed": sorted(removed)}
