"""The on-disk partition format: part_config JSON (DGL's schema plus our keys), npy shards, checksums.

A partition folder holds ``NAME.json`` and, per part, a ``partN/`` folder of ``.npy`` files that a
server can memory-map. Every file's size and xxh3-128 checksum is recorded in the JSON under
``files``; a folder is written under a temporary name and renamed into place only when complete,
so a folder with a config either is whole or does not exist. A run that dies leaves only its
``.NAME.tmp-PID`` folder, which the next run into the same parent removes
(:func:`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import xxhash

from .errors import ChecksumError, OutputExistsError, OutputWriteError, PartitionFormatError
from .paths import FILES_KEY, check_config_paths, check_part_path

FORMAT_VERSION = 1
CHECKSUM_ALGO = "xxh3_128"
_HASH_CHUNK = 64 << 20
# OSError numbers meaning "the file system has no room for the output".
_NO_SPACE = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}

# Keys DGL's own tools read; we write all of them and never change their meaning.
DGL_KEYS = (
    "graph_name",
    "num_nodes",
    "num_edges",
    "part_method",
    "num_parts",
    "halo_hops",
    "node_map",
    "edge_map",
    "ntypes",
    "etypes",
)
# Keys of ours (beside DGL_KEYS) that read_config requires, and what each holds.
OUR_KEYS = {
    "files": "the size and checksum of every shard",
    "feature_schema": "the shape and dtype of every node and edge feature",
}


@dataclass(frozen=True)
class PartEntry:
    """One part's entry (``part-N``) of a part config: the relative paths of its shards.

    ``doc`` is the entry as the JSON holds it; the properties name what readers use."""

    part_id: int
    doc: Mapping[str, Any]

    @property
    def csc(self) -> Mapping[str, Mapping[str, str]]:
        """Per edge type key, the in-edge CSC's arrays (``indptr``, ``indices``)."""
        value: Mapping[str, Mapping[str, str]] = self.doc["csc"]
        return value

    @property
    def csr(self) -> Mapping[str, Mapping[str, str]]:
        """Per edge type key, the out-CSR's arrays (empty when written with --no-out-edges)."""
        value: Mapping[str, Mapping[str, str]] = self.doc.get("csr", {})
        return value

    @property
    def has_out_edges(self) -> bool:
        """Whether the part holds its out-CSR (not written with ``--no-out-edges``)."""
        return "csr" in self.doc

    @property
    def halo_nids(self) -> str | None:
        """The halo nodes' array, or None when the part has no halo."""
        value: str | None = self.doc.get("halo_nids")
        return value

    @property
    def halo_edges(self) -> Mapping[str, Any] | None:
        """The halo edges' arrays, or None when the part has none."""
        value: Mapping[str, Any] | None = self.doc.get("halo_edges")
        return value

    @property
    def node_feat_files(self) -> Mapping[str, str]:
        """Owned nodes' feature arrays keyed ``"ntype/name"``."""
        value: Mapping[str, str] = self.doc["node_feat_files"]
        return value

    @property
    def edge_feat_files(self) -> Mapping[str, str]:
        """Inner edges' feature arrays keyed ``"src:etype:dst/name"``."""
        value: Mapping[str, str] = self.doc.get("edge_feat_files", {})
        return value


@dataclass(frozen=True, eq=False)
class PartConfig(Mapping[str, Any]):
    """A partition's config, as :func:`read_config` returns it: the JSON document (read as a
    mapping, DGL's keys and ours) plus where it was read from, with typed accessors for what
    the packages read.

    ``path`` is None for a config built in memory (DGL's dicts handed to the partition book);
    messages then name it "the partition config". Nothing here is mutable: a config is read,
    never changed in place.
    """

    doc: Mapping[str, Any]
    path: Path | None = None
    parts: tuple[PartEntry, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc", MappingProxyType(dict(self.doc)))
        n = self.doc.get("num_parts")
        entries = tuple(PartEntry(i, self.doc[f"part-{i}"])
                        for i in range(n if isinstance(n, int) else 0)
                        if isinstance(self.doc.get(f"part-{i}"), Mapping))
        object.__setattr__(self, "parts", entries)

    @classmethod
    def of(cls, config: PartConfig | Mapping[str, Any]) -> PartConfig:
        """``config`` itself when it is a PartConfig, else its document (e.g. DGL's JSON as a
        dict) as a config with no path."""
        return config if isinstance(config, PartConfig) else cls(config)

    # --- the mapping: the JSON document ----------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)

    # --- where it lives -------------------------------------------------------------------
    @property
    def file(self) -> Path:
        """The JSON file it was read from (PartitionFormatError for a config built in memory,
        which has no file, nor a folder to read shards from)."""
        if self.path is None:
            raise PartitionFormatError("the partition config was built in memory: it has no "
                                       "file, nor a folder to read shards from",
                                       hint="read it with read_config(PATH)")
        return self.path

    @property
    def dir(self) -> Path:
        """The partition folder (paths in the config are relative to it)."""
        return self.file.parent

    @property
    def where(self) -> str:
        """How messages name the config: its path, or "the partition config"."""
        return str(self.path) if self.path is not None else "the partition config"

    # --- what the packages read -----------------------------------------------------------
    @property
    def graph_name(self) -> str:
        """The graph's name (``NAME.json``, ``data/NAME/`` on the hosts)."""
        return str(self.doc["graph_name"])

    @property
    def num_parts(self) -> int:
        """Number of parts (one per machine)."""
        return int(self.doc["num_parts"])

    @property
    def halo_hops(self) -> int:
        """Hops of halo nodes each part holds."""
        return int(self.doc["halo_hops"])

    @property
    def ntypes(self) -> Mapping[str, int]:
        """Node type name -> node type id."""
        value: Mapping[str, int] = self.doc["ntypes"]
        return value

    @property
    def etypes(self) -> Mapping[str, int]:
        """Edge type key (``"src:etype:dst"``) -> edge type id."""
        value: Mapping[str, int] = self.doc["etypes"]
        return value

    @property
    def node_map(self) -> Mapping[str, Any]:
        """Per node type, each part's ``[start, end)`` of homogeneous ids."""
        value: Mapping[str, Any] = self.doc["node_map"]
        return value

    @property
    def edge_map(self) -> Mapping[str, Any]:
        """Per edge type key, each part's ``[start, end)`` of edge ids."""
        value: Mapping[str, Any] = self.doc["edge_map"]
        return value

    @property
    def orig_nids(self) -> Mapping[str, str]:
        """Per node type, the array of each relabeled id's input id."""
        value: Mapping[str, str] = self.doc.get("orig_nids", {})
        return value

    @property
    def orig_eids(self) -> Mapping[str, str]:
        """Per edge type key, the array of each relabeled edge id's input id."""
        value: Mapping[str, str] = self.doc.get("orig_eids", {})
        return value

    @property
    def feature_schema(self) -> Mapping[str, Mapping[str, Any]]:
        """``{"node"|"edge": {"TYPE/name": {"shape": [...], "dtype": "..."}}}``."""
        value: Mapping[str, Mapping[str, Any]] = self.doc.get("feature_schema", {})
        return value

    @property
    def files(self) -> Mapping[str, Mapping[str, Any]]:
        """Every shard's relative path -> its recorded ``size`` and checksum."""
        value: Mapping[str, Mapping[str, Any]] = self.doc.get("files", {})
        return value

    @property
    def quality(self) -> Mapping[str, Any] | None:
        """The partition's quality report (None for partitions written before it existed)."""
        value: Mapping[str, Any] | None = self.doc.get("quality")
        return value

    def part(self, part_id: int) -> PartEntry:
        """The entry of part ``part_id``; PartitionFormatError when there is no such part."""
        if not 0 <= part_id < len(self.parts):
            raise PartitionFormatError(f"{self.where}: part {part_id} does not exist "
                                       f"(num_parts is {self.num_parts})")
        return self.parts[part_id]


def safe_name(name: str) -> str:
    """A file-name-safe form of a type or feature name (the JSON keeps the real name)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


class ShardWriter:
    """Writes ``.npy`` files under a root folder, recording each file's size and checksum.

    The checksum is computed from the bytes as they are written (header, then the array's
    buffer), so no file is read back. With ``background=True`` writes run on a worker thread
    (the caller must not modify an array after handing it over); ``wait()`` joins them and
    re-raises the first failure. A full disk or quota raises OutputWriteError naming
    ``output`` (the path ``root`` becomes once complete; ``root`` itself by default).
    """

    def __init__(
        self, root: Path, *, background: bool = False, output: Path | None = None
    ) -> None:
        self.root = Path(root)
        self.output = Path(output) if output is not None else self.root
        self.files: dict[str, dict[str, Any]] = {}
        self._background = background
        self._pending: list[Any] = []

    def save(self, relpath: str, array: np.ndarray) -> str:
        """Write ``array`` to ``root/relpath`` as .npy and return ``relpath``."""
        array = np.ascontiguousarray(array)
        return self.save_blocks(relpath, array.dtype, array.shape, [array])

    def save_blocks(self, relpath: str, dtype: np.dtype, shape: tuple[int, ...],
                    blocks: Iterable[np.ndarray]) -> str:
        """Write the ``.npy`` of a C-order array of ``dtype`` and ``shape`` whose rows come in
        ``blocks`` (consumed as written, on the worker thread when in the background), so
        the whole array never needs to be in memory. Returns ``relpath``.

        Raises ValueError (through ``wait()`` in the background) when the blocks do not add
        up to ``shape``: a short file is never recorded as written.
        """
        if self._background:
            from .parallel import submit

            self._pending.append(submit(self._write, relpath, np.dtype(dtype), tuple(shape),
                                        blocks))
        else:
            self._write(relpath, np.dtype(dtype), tuple(shape), blocks)
        return relpath

    def wait(self) -> None:
        """Block until every background write has finished; raise the first error."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        for e in errors:
            if e is not None:
                raise e

    def _write(self, relpath: str, dtype: np.dtype, shape: tuple[int, ...],
               blocks: Iterable[np.ndarray]) -> None:
        path = self.root / relpath
        digest = xxhash.xxh3_128()
        header = _npy_header(dtype, shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        written = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.write(header)
                digest.update(header)
                for block in blocks:
                    block = np.ascontiguousarray(block, dtype=dtype)
                    if block.size:
                        buf = memoryview(block.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
                        f.write(buf)
                        digest.update(buf)
                        written += block.nbytes
        except OSError as exc:
            # The bytes of the files already written plus this one: what the output needs at
            # least (list(): other threads add files meanwhile).
            done = sum(meta["size"] for meta in list(self.files.values()))
            error = out_of_space_error(exc, self.output, file=relpath,
                                       needed=done + len(header) + nbytes)
            if error is None:
                raise
            raise error from exc
        if written != nbytes:
            raise ValueError(f"{relpath}: blocks gave {written} bytes, the shape {shape} of "
                             f"{dtype} needs {nbytes}")
        self.files[relpath] = {"size": path.stat().st_size, CHECKSUM_ALGO: digest.hexdigest()}


def format_bytes(nbytes: int) -> str:
    """``nbytes`` for people: bytes below 1 KiB, else KiB, MiB, GiB or TiB with one decimal."""
    nbytes = int(nbytes)
    if nbytes < 1024:
        return f"{nbytes} bytes"
    exp = min(4, (nbytes.bit_length() - 1) // 10)
    return f"{nbytes / 1024**exp:.1f} {('KiB', 'MiB', 'GiB', 'TiB')[exp - 1]}"


def free_disk_beside(path: Path) -> tuple[Path, int | None]:
    """The nearest existing folder above ``path`` (where it will be created) and the bytes free
    on its file system (None when that cannot be told)."""
    folder = Path(path).absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return folder, shutil.disk_usage(folder).free
    except OSError:
        return folder, None


def out_of_space_error(
    exc: OSError, output: Path, *, file: str | None = None, needed: int | None = None
) -> OutputWriteError | None:
    """The OutputWriteError for ``exc`` if it is a full disk or quota (ENOSPC, EDQUOT) met
    while writing ``output`` (``file`` inside it, when known), else None.

    ``needed`` is what the output needs at least, in bytes, when known. The caller removes the
    partial output; the message says so.
    """
    what = _NO_SPACE.get(exc.errno or 0)
    if what is None:
        return None
    message = f"{output}: {what} (errno {errno.errorcode[exc.errno or 0]}) writing {file or 'it'}"
    if needed:
        message += f"; the output needs at least {format_bytes(needed)}"
    return OutputWriteError(
        message + "; the partial output was removed",
        hint=f"free {'at least ' + format_bytes(needed) if needed else 'space'} on the file system of "
             f"{output.parent} (see `df -h {output.parent}`), or write to another folder",
        path=str(output),
        needed=needed,
    )


def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    import io

    bio = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(bio, header)
    except ValueError:  # header over 64 KiB: only absurd shapes need format 2.0
        bio = io.BytesIO()
        np.lib.format.write_array_header_2_0(bio, header)
    return bio.getvalue()


def file_checksum(path: Path) -> str:
    """xxh3-128 of a file's bytes, read in chunks."""
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_output_dir(out: Path, overwrite: bool) -> None:
    """Raise OutputExistsError if ``out`` may not be (re)placed; callers check before long work."""
    if out.exists():
        if out.is_file():
            raise OutputExistsError(f"output {out} is a file, not a folder")
        entries = list(out.iterdir())
        if entries and not overwrite:
            raise OutputExistsError(
                f"output folder {out} already exists and is not empty",
                hint="pass --overwrite to replace it, or choose another --out",
            )
        if entries and not _looks_like_partition_folder(out):
            raise OutputExistsError(
                f"output folder {out} is not empty and holds no partition config (*.json with "
                "'num_parts'); refusing to replace it even with --overwrite",
                hint="choose an empty or new --out folder",
            )


@contextlib.contextmanager
def atomic_output_dir(out: Path, overwrite: bool,
                      on_written: Callable[[], None] | None = None) -> Iterator[Path]:
    """Yield a temporary sibling folder that replaces ``out`` only if the block succeeds.

    Refuses to replace an existing non-empty ``out`` unless ``overwrite``; even then only a
    folder that holds a partition config is replaced, so a mistyped path loses nothing.
    On any exception (a signal the caller turned into one included) the temporary folder is
    removed and ``out`` is untouched; a full disk or quota becomes OutputWriteError. The
    temporary folders of dead runs into the same ``out`` go first (:func:`remove_stale_temps`).
    ``on_written`` is called as soon as ``out`` is in place, still inside this context
    manager's exit, so a caller that turns signals into exceptions can stop doing so before
    any of its own code runs with the output complete.
    """
    out = Path(out)
    check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        yield tmp
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        error = out_of_space_error(exc, out) if isinstance(exc, OSError) else None
        if error is not None:
            raise error from exc
        raise
    _commit(tmp, out)
    if on_written is not None:
        on_written()


def commit_output(tmp: Path, out: Path) -> None:
    """Put a complete temporary folder ``tmp`` in place as ``out`` (see :func:`_commit`)."""
    _commit(tmp, out)


def _commit(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``, moving an existing ``out`` aside first. If that is cut short
    (a signal between the two renames), ``out`` is put back and ``tmp`` removed."""
    old = None
    try:
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
    except BaseException:
        if old is not None and not out.exists():
            os.replace(old, out)
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)  # only there if the new ``out`` is in place
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


WRITER_MARK = ".writer-"  # a file in a temporary folder: "HOST PID" of one of its writers


def mark_writer(folder: Path, name: str) -> Path:
    """Record that this process writes into the temporary ``folder`` (``name`` tells writers
    apart, e.g. ``rank-2``): :func:`remove_stale_temps` leaves the folder alone while any
    writer recorded there lives on this host, whichever process's PID the folder is named by.
    Returns the mark, which the writer removes before the folder is put in place."""
    mark = Path(folder) / f"{WRITER_MARK}{name}"
    mark.write_text(f"{socket.gethostname()} {os.getpid()}\n")
    return mark


def _writer_alive(folder: Path) -> bool:
    """Whether a writer :func:`mark_writer` recorded in ``folder`` still lives on this host."""
    host = socket.gethostname()
    for mark in folder.glob(f"{WRITER_MARK}*"):
        try:
            where, pid = mark.read_text().split()
            if where == host and _pid_alive(int(pid)):
                return True
        except (OSError, ValueError):
            continue
    return False


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove the temporary folders dead runs left beside ``target``; return them.

    Those are ``.NAME.tmp-PID`` (and ``.NAME.tmp-PID-*``) folders in ``target``'s parent whose
    process PID no longer exists, and none of whose writers recorded with :func:`mark_writer`
    (ranks of one run writing into one folder) lives on. A live process's folder is never
    touched, this process's own neither. PIDs are this host's: a folder shared between hosts
    should get one writer at a time.
    """
    target = Path(target)
    pattern = re.compile(rf"\.{re.escape(target.name)}\.tmp-(\d+)(?:-.*)?")
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return []
    removed = []
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is None or entry.is_symlink() or not entry.is_dir():
            continue
        pid = int(found.group(1))
        if pid == os.getpid() or _pid_alive(pid) or _writer_alive(entry):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (any owner; a zombie counts). A number
    that is no process id (0, or past the OS's range) counts as alive: no run of ours wrote
    that folder, so it is left alone."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _looks_like_partition_folder(folder: Path) -> bool:
    for p in folder.glob("*.json"):
        try:
            with open(p) as f:
                if "num_parts" in json.load(f):
                    return True
        except (OSError, ValueError):
            continue
    return False


def write_config(path: Path, config: dict[str, Any]) -> None:
    """Write the part config JSON (temp file + rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def find_config(path: str | os.PathLike[str]) -> Path:
    """Resolve a partition config path: the JSON itself or a folder holding exactly one."""
    p = Path(path)
    if p.is_dir():
        candidates = [c for c in sorted(p.glob("*.json")) if not c.name.startswith(".")]
        if len(candidates) != 1:
            raise PartitionFormatError(
                f"{p}: expected one partition config (*.json) in the folder, found "
                f"{len(candidates)}",
                hint="pass the JSON file itself",
            )
        return candidates[0]
    if not p.exists():
        raise PartitionFormatError(f"{p}: no such partition config")
    return p


def read_config(path: str | os.PathLike[str]) -> PartConfig:
    """Load and check a part config; raises PartitionFormatError naming the file and key.

    The config must be ours (``format_version``), hold DGL's keys and ours (``files``,
    ``feature_schema``), and every path it names must stay inside its folder
    (:func:`check_config_paths`)."""
    p = find_config(path)
    try:
        with open(p) as f:
            config = json.load(f)
    except json.JSONDecodeError as e:
        raise PartitionFormatError(f"{p}:{e.lineno}: not valid JSON ({e.msg})") from None
    except OSError as e:
        raise PartitionFormatError(f"{p}: cannot read ({e.strerror})") from None
    if not isinstance(config, dict):
        raise PartitionFormatError(f"{p}: expected a JSON object at the top level")
    for key in DGL_KEYS:
        if key not in config:
            raise PartitionFormatError(f"{p}: missing key {key!r}")
    version = config.get("format_version")
    if version is None:
        raise PartitionFormatError(
            f"{p}: no 'format_version' key; this looks like a partition written by DGL itself",
            hint="re-partition the graph with 'dglctl partition' (DGL's .dgl shards are not read)",
        )
    if version > FORMAT_VERSION:
        raise PartitionFormatError(
            f"{p}: format_version {version} is newer than this dglctl understands ({FORMAT_VERSION})",
            hint="upgrade dglctl on this host",
        )
    _check_our_keys(config, p)
    num_parts = config["num_parts"]
    if not isinstance(num_parts, int) or isinstance(num_parts, bool) or num_parts < 1:
        raise PartitionFormatError(f"{p}: num_parts = {num_parts!r}: expected an integer >= 1")
    for i in range(num_parts):
        if f"part-{i}" not in config:
            raise PartitionFormatError(f"{p}: missing key 'part-{i}'")
    check_config_paths(config, str(p), p.parent)
    return PartConfig(config, p)


def _check_our_keys(config: dict[str, Any], p: Path) -> None:
    """Refuse a config of ours (it has ``format_version``) without the keys DGL's schema lacks
    and every reader needs: with no ``files`` there is nothing to verify (``inspect`` would
    report "0 checked, all match"), with no ``feature_schema`` no trainer finds a feature."""
    hint = ("the config was edited, or written by another tool: re-run 'dglctl partition' "
            "to write the partition again")
    for key, holds in OUR_KEYS.items():
        if key not in config:
            raise PartitionFormatError(f"{p}: missing key {key!r} ({holds})", hint=hint)
        if not isinstance(config[key], dict):
            raise PartitionFormatError(
                f"{p}: {key!r} = {config[key]!r:.60}: expected a JSON object ({holds})",
                hint=hint)
    if not config["files"]:
        raise PartitionFormatError(f"{p}: 'files' is empty: no shard can be verified "
                                   f"({OUR_KEYS['files']})", hint=hint)


def verify_files(
    config: PartConfig, parts: list[int] | None = None, *, checksums: bool = True
) -> list[str]:
    """Check recorded sizes (and checksums) of the files of ``parts`` (all when None).

    Returns the list of problems, each naming the file; empty when everything matches.
    """
    root = config.dir
    where, real_root = config.where, os.path.realpath(root)
    problems = []
    for rel, meta in config.files.items():
        path = check_part_path(root, rel, where, FILES_KEY, real_root)
        if parts is not None:
            m = re.match(r"part(\d+)/", rel)
            if m and int(m.group(1)) not in parts:
                continue
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        size = path.stat().st_size
        if size != meta["size"]:
            problems.append(f"{path}: size {size} bytes, expected {meta['size']}")
            continue
        if checksums and file_checksum(path) != meta[CHECKSUM_ALGO]:
            problems.append(f"{path}: checksum mismatch (file changed or corrupted)")
    return problems


def checksum_error(config: PartConfig, problems: list[str]) -> ChecksumError:
    """The error that lists every file that failed verification."""
    return ChecksumError(
        f"{config.where}: {len(problems)} file(s) fail verification:\n  "
        + "\n  ".join(problems),
        hint="re-run 'dglctl partition' (or re-copy the folder) to restore them",
    )


def check_files(config: PartConfig, parts: list[int] | None = None) -> None:
    """Raise ChecksumError listing every file that fails its recorded size or checksum."""
    problems = verify_files(config, parts)
    if problems:
        raise checksum_error(config, problems)


def load_array(config: PartConfig, relpath: str, *, mmap: bool = True,
               key: str = "a path") -> np.ndarray:
    """Open a shard listed in the config, memory-mapped read-only by default.

    ``relpath`` must stay inside the partition folder (:func:`check_part_path`; ``key`` is how
    an error names where the config holds it)."""
    path = check_part_path(config.dir, relpath, config.where, key)
    try:
        loaded: np.ndarray = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        return loaded
    except FileNotFoundError:
        raise PartitionFormatError(f"{path}: missing partition file") from None
    except ValueError as e:
        raise PartitionFormatError(f"{path}: not a readable .npy file ({e})") from None
