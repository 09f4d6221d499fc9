"""The paths a part config names, checked before anything follows them.

A part config travels to every host, where its paths are joined to the host's copy of the
folder and read by the servers; ``dglctl launch`` writes its files there by the same names. So
every path must be relative to the config's folder, ``/``-separated, and made of components of
the set :func:`partitioner.format.safe_name` writes: no ``..``, no absolute path, no ``~``, no
NUL, newline or space, and no symlink that leads out of the folder. Anything else could lead
outside (a copy into ``~/.ssh/authorized_keys``, a read of another user's file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import PartitionFormatError

_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9._-]{1,255}")
# The keys of a part entry (``part-N``) whose values are paths, nested in mappings at any depth.
PART_PATH_KEYS = ("node_feats", "edge_feats", "part_graph", "halo_nids", "halo_edges", "csc",
                  "csr", "node_feat_files", "edge_feat_files")
FILES_KEY = "['files'] key"  # how errors name a path that is a key of the ``files`` mapping


def path_problem(rel: Any) -> str | None:
    """Why ``rel`` is not a safe path relative to a partition folder, or None when it is
    (a check of the string alone, no I/O; :func:`check_part_path` also resolves symlinks)."""
    if not isinstance(rel, str):
        return "a path must be a string"
    if rel.startswith("/"):
        return "an absolute path; paths are relative to the partition folder"
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            return f"component {part!r} is not allowed (paths are normalised and stay inside)"
        if not _SAFE_COMPONENT.fullmatch(part):
            return f"component {part!r} is not 1-255 characters of [A-Za-z0-9._-]"
    return None


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a graph (it is used in file and shared-memory names), or None."""
    if not isinstance(name, str) or name in (".", "..") or not _SAFE_COMPONENT.fullmatch(name):
        return "a graph name must be 1-255 characters of [A-Za-z0-9._-], not '.' or '..'"
    return None


def refuse(where: str, key: str, value: Any, why: str) -> PartitionFormatError:
    """The error for an unsafe value: the config (``where``), the JSON key, the value, why."""
    return PartitionFormatError(
        f"{where}: {key} = {value!r}: {why}",
        hint="the partition config was edited or is not trusted: re-run 'dglctl partition'")


def check_part_path(root: str | os.PathLike[str], rel: Any, where: str, key: str,
                    real_root: str | None = None) -> Path:
    """``root / rel``, once ``rel`` is a safe relative path (:func:`path_problem`) that stays
    inside ``root`` after resolving symlinks; else a PartitionFormatError naming the config
    (``where``), the JSON ``key`` and the value. ``real_root`` saves resolving ``root`` again."""
    why = path_problem(rel)
    if why is not None:
        raise refuse(where, key, rel, why)
    path = Path(root) / rel
    real_root = real_root or os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise refuse(where, key, rel, f"a symlink leads outside the folder (to {real})")
    return path


def config_paths(config: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(key, path)`` of every path ``config`` names: the path values of each part entry
    (PART_PATH_KEYS), of ``orig_nids`` / ``orig_eids``, then the keys of ``files``."""
    for i in range(config["num_parts"]):
        entry = config[f"part-{i}"]
        if not isinstance(entry, dict):
            yield f"['part-{i}']", entry  # not a mapping: refused as "not a string" path
            continue
        for k in PART_PATH_KEYS:
            if k in entry:
                yield from _leaves(entry[k], f"['part-{i}'][{k!r}]")
    for k in ("orig_nids", "orig_eids"):
        if k in config:
            yield from _leaves(config[k], f"[{k!r}]")
    files = config.get("files", {})
    yield from ((FILES_KEY, rel) for rel in (files if isinstance(files, dict) else [files]))


def _leaves(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{key}[{k!r}]")
    else:
        yield key, value


def check_config_paths(config: dict[str, Any], where: str, root: str | os.PathLike[str]) -> None:
    """Raise PartitionFormatError for the first unsafe graph name or path in ``config``
    (``where`` names the config file, ``root`` is its folder)."""
    why = name_problem(config["graph_name"])
    if why is not None:
        raise refuse(where, "['graph_name']", config["graph_name"], why)
    real_root = os.path.realpath(root)
    for key, rel in config_paths(config):
        check_part_path(root, rel, where, key, real_root)
