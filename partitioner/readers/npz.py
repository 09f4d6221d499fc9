"""Reading and writing homogeneous graphs as NumPy ``.npz`` archives (COO or CSR)."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ..errors import PartitionInputError
from ..graph import HOMO_ETYPE, HOMO_NTYPE, Graph
from ..inputs import id_space_too_sparse, sparse_ids_error

NODE_PREFIX = "node:"
EDGE_PREFIX = "edge:"
_STRUCTURE_KEYS = ("src", "dst", "indptr", "indices", "num_nodes")
_ALLOWED = "src, dst, indptr, indices, num_nodes, node:NAME, edge:NAME"


def _id_array(archive: np.lib.npyio.NpzFile, key: str, path: str) -> np.ndarray:
    """Load one id array and insist on 1-D integers (floats would silently truncate)."""
    arr = _load(archive, key, path)
    if arr.ndim != 1:
        raise PartitionInputError(f"{key!r} must be a 1-D array (got shape {arr.shape})", path=path)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise PartitionInputError(
            f"{key!r} must hold integer node ids (got dtype {arr.dtype})", path=path
        )
    return arr.astype(np.int64, copy=False)


def _mmap_member(archive: np.lib.npyio.NpzFile, key: str, path: str) -> np.ndarray | None:
    """Memory-map an uncompressed member in place (no copy, no CRC pass), else None.

    ``np.load`` reads a member through zipfile: a full copy plus a CRC pass, ~1 s for the
    450 MB of a 1M-node benchmark graph. Stored members are plain .npy bytes inside the zip.
    """
    assert archive.zip is not None  # set while the archive is open; None only once closed
    info = archive.zip.getinfo(key + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        if local[:4] != b"PK\x03\x04":
            return None
        name_len = int.from_bytes(local[26:28], "little")
        extra_len = int.from_bytes(local[28:30], "little")
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            return None
        shape, fortran, dtype = readers[version](f)
        if dtype.hasobject:
            return None
        offset = f.tell()
    if int(np.prod(shape)) == 0:
        return np.empty(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                     order="F" if fortran else "C").view(np.ndarray)


def _load(archive: np.lib.npyio.NpzFile, key: str, path: str) -> np.ndarray:
    try:
        mapped = _mmap_member(archive, key, path)
        return mapped if mapped is not None else archive[key]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise PartitionInputError(f"array {key!r} is unreadable: {exc}", path=path) from exc


def _open(path: str) -> np.lib.npyio.NpzFile:
    """Open the archive lazily, turning every flavour of 'not an npz' into one error."""
    if not os.path.exists(path):
        raise PartitionInputError("no such file", path=path)
    if not os.path.isfile(path):
        raise PartitionInputError("not a regular file", path=path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise PartitionInputError(
            f"not a NumPy .npz archive ({exc})",
            path=path,
            hint="write it with numpy.savez(path, src=..., dst=...) or save as a text edge list",
        ) from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise PartitionInputError(
            "is a single .npy array, not an .npz archive with named arrays",
            path=path,
            hint=f"an .npz graph holds named arrays: {_ALLOWED}",
        )
    return archive


def _check_keys(keys: list[str], path: str) -> None:
    for key in keys:
        if key in _STRUCTURE_KEYS:
            continue
        for prefix in (NODE_PREFIX, EDGE_PREFIX):
            if key.startswith(prefix):
                if not key[len(prefix) :]:
                    raise PartitionInputError(
                        f"key {key!r} has an empty feature name",
                        path=path,
                        hint=f"name it like '{prefix}feat'",
                    )
                break
        else:
            raise PartitionInputError(
                f"unknown key {key!r}; allowed keys are {_ALLOWED}",
                path=path,
                hint="prefix node features with 'node:' and edge features with 'edge:'",
            )


def _edges_from_csr(
    indptr: np.ndarray, indices: np.ndarray, num_nodes: int | None, path: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """Expand CSR rows (sources) to COO, checking the row pointer first."""
    if len(indptr) == 0:
        raise PartitionInputError("'indptr' is empty; it needs num_nodes + 1 entries", path=path)
    rows = len(indptr) - 1
    if num_nodes is not None and rows != num_nodes:
        raise PartitionInputError(
            f"'indptr' has {len(indptr)} entries but num_nodes is {num_nodes} "
            f"(it needs num_nodes + 1 = {num_nodes + 1})",
            path=path,
        )
    if indptr[0] != 0:
        raise PartitionInputError(f"'indptr' must start at 0 (starts at {indptr[0]})", path=path)
    steps = np.diff(indptr)
    if (steps < 0).any():
        at = int(np.flatnonzero(steps < 0)[0])
        raise PartitionInputError(
            f"'indptr' must not decrease (indptr[{at}] = {indptr[at]} > "
            f"indptr[{at + 1}] = {indptr[at + 1]})",
            path=path,
        )
    if indptr[-1] != len(indices):
        raise PartitionInputError(
            f"'indptr' ends at {indptr[-1]} but 'indices' has {len(indices)} entries", path=path
        )
    src = np.repeat(np.arange(rows, dtype=np.int64), steps)
    return src, indices, rows


def read_npz(path: str | os.PathLike) -> Graph:
    """Read a homogeneous graph from an ``.npz`` archive.

    Structure: ``src`` + ``dst`` (COO, one entry per directed edge) or ``indptr`` + ``indices``
    (CSR; row = source node, indices = destinations), optional scalar ``num_nodes`` (else
    max id + 1, or the node feature row count when all features agree on a larger one). Node
    features are stored under ``node:NAME``, edge features under ``edge:NAME``.
    Raises PartitionInputError naming the file for anything missing or inconsistent.
    """
    path = os.fspath(path)
    with _open(path) as archive:
        keys = list(archive.files)
        _check_keys(keys, path)
        coo = [k for k in ("src", "dst") if k in keys]
        csr = [k for k in ("indptr", "indices") if k in keys]
        if coo and csr:
            raise PartitionInputError(
                f"has both COO ({', '.join(coo)}) and CSR ({', '.join(csr)}) arrays; keep one",
                path=path,
            )
        if not coo and not csr:
            raise PartitionInputError(
                "has no edges: it needs 'src' and 'dst' (COO) or 'indptr' and 'indices' (CSR)",
                path=path,
                hint=f"found keys: {', '.join(keys) or 'none'}",
            )
        pair = ("src", "dst") if coo else ("indptr", "indices")
        missing = [k for k in pair if k not in keys]
        if missing:
            raise PartitionInputError(
                f"has {', '.join(k for k in pair if k in keys)!s} but no {missing[0]!r}", path=path
            )

        num_nodes: int | None = None
        if "num_nodes" in keys:
            raw = _load(archive, "num_nodes", path)
            if raw.size != 1 or not np.issubdtype(raw.dtype, np.integer) or int(raw.ravel()[0]) < 0:
                raise PartitionInputError(
                    f"'num_nodes' must be one non-negative integer (got {raw!r})", path=path
                )
            num_nodes = int(raw.ravel()[0])

        if coo:
            src = _id_array(archive, "src", path)
            dst = _id_array(archive, "dst", path)
            if len(src) != len(dst):
                raise PartitionInputError(
                    f"'src' has {len(src)} entries but 'dst' has {len(dst)}; "
                    "they must have one entry per edge each",
                    path=path,
                )
        else:
            src, dst, rows = _edges_from_csr(
                _id_array(archive, "indptr", path),
                _id_array(archive, "indices", path),
                num_nodes,
                path,
            )
            num_nodes = rows if num_nodes is None else num_nodes

        ndata = {
            k[len(NODE_PREFIX) :]: _load(archive, k, path)
            for k in keys
            if k.startswith(NODE_PREFIX)
        }
        edata = {
            k[len(EDGE_PREFIX) :]: _load(archive, k, path)
            for k in keys
            if k.startswith(EDGE_PREFIX)
        }

    if num_nodes is None:
        max_id = int(max(src.max(initial=-1), dst.max(initial=-1)))
        rows_seen = {arr.shape[0] for arr in ndata.values() if arr.ndim}
        # Trailing nodes without edges are invisible in the ids; agreeing features reveal them.
        if len(rows_seen) == 1:
            num_nodes = max(max_id + 1, rows_seen.pop())
        else:  # only the ids tell: refuse a count no edge explains (inputs.id_space_too_sparse)
            num_nodes = max_id + 1
            if id_space_too_sparse(num_nodes, len(src)):
                raise sparse_ids_error(max_id, len(src), path=path)
    graph = Graph.homogeneous(src, dst, num_nodes, ndata=ndata, edata=edata)
    graph.validate(path)
    return graph


def write_npz(graph: Graph, path: str | os.PathLike, *, compress: bool = False) -> None:
    """Write a homogeneous graph as COO ``.npz`` (``src``, ``dst``, ``num_nodes``, features).

    The file appears atomically: it is written to a temporary file in the same folder and
    renamed over ``path``. Heterogeneous graphs raise PartitionInputError (use chunked).
    """
    path = os.fspath(path)
    if not graph.is_homogeneous:
        raise PartitionInputError(
            "an .npz graph holds one node and edge type; this graph is heterogeneous",
            path=path,
            hint="write it with write_chunked instead",
        )
    graph.validate(path)
    src, dst = graph.edges[HOMO_ETYPE]
    arrays: dict[str, np.ndarray] = {
        "src": src,
        "dst": dst,
        "num_nodes": np.asarray(graph.num_nodes[HOMO_NTYPE], dtype=np.int64),
    }
    for name, arr in graph.ndata.get(HOMO_NTYPE, {}).items():
        arrays[NODE_PREFIX + name] = arr
    for name, arr in graph.edata.get(HOMO_ETYPE, {}).items():
        arrays[EDGE_PREFIX + name] = arr
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise PartitionInputError("the folder to write into does not exist", path=path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{Path(path).name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            # mypy maps **arrays onto savez's `allow_pickle: bool` too; the keys here are never
            # "allow_pickle" (and numpy 1.26, still supported, has no such keyword to pass).
            (np.savez_compressed if compress else np.savez)(fh, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
