"""Reading and writing DGL's chunked graph format (``metadata.json`` + edge CSVs + ``.npy``;
Parquet chunks are read too: ``chunk_files``)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OutputExistsError, PartitionInputError, PartitionOptionError
from ..format import ShardWriter, out_of_space_error, remove_stale_temps
from ..graph import CanonicalEtype, Graph, etype_key, parse_etype_key
from ..spill import Column, SpillFolder, discarded_on_error
from .chunk_files import EDGE_FORMATS, FEATURE_FORMATS, read_edge_chunk, read_feature_chunk
from .text_writer import write_edge_lines

METADATA_NAMES = ("metadata.json", "meta.json")
_REQUIRED = (
    "graph_name",
    "node_type",
    "num_nodes_per_chunk",
    "edge_type",
    "num_edges_per_chunk",
    "edges",
)


def _find_metadata(path: str) -> str:
    if os.path.isdir(path):
        for name in METADATA_NAMES:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return candidate
        raise PartitionInputError(
            "folder has no metadata.json",
            path=path,
            hint="a chunked graph folder holds metadata.json next to its edge and .npy files",
        )
    if not os.path.exists(path):
        raise PartitionInputError("no such file or folder", path=path)
    return path


def _load_metadata(meta_path: str) -> dict[str, Any]:
    try:
        with open(meta_path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except json.JSONDecodeError as exc:
        raise PartitionInputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=meta_path, line=exc.lineno
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PartitionInputError(f"cannot read metadata: {exc}", path=meta_path) from exc
    if not isinstance(meta, dict):
        raise PartitionInputError("metadata must be a JSON object", path=meta_path)
    missing = [key for key in _REQUIRED if key not in meta]
    if missing:
        raise PartitionInputError(
            f"missing key {missing[0]!r}"
            + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else ""),
            path=meta_path,
            hint=f"chunked metadata needs: {', '.join(_REQUIRED)}",
        )
    return meta


def _str_list(meta: dict[str, Any], key: str, meta_path: str) -> list[str]:
    value = meta[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PartitionInputError(f"{key!r} must be a list of non-empty strings", path=meta_path)
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise PartitionInputError(f"{key!r} lists {dupes[0]!r} more than once", path=meta_path)
    return value


def _chunk_sizes(
    meta: dict[str, Any], key: str, names: list[str], meta_path: str
) -> list[list[int]]:
    """One list of non-negative chunk sizes per type, aligned with ``names``."""
    value = meta[key]
    if not isinstance(value, list) or len(value) != len(names):
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise PartitionInputError(
            f"{key!r} must hold one list of chunk sizes per type: {len(names)} expected, got {got}",
            path=meta_path,
        )
    for name, sizes in zip(names, value, strict=True):
        if not isinstance(sizes, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes
        ):
            raise PartitionInputError(
                f"{key!r} for {name!r} must be a list of non-negative integers (got {sizes!r})",
                path=meta_path,
            )
    return value


def _entry(container: Any, key: str, where: str, meta_path: str, kind: type = dict) -> Any:
    if not isinstance(container, dict) or key not in container:
        raise PartitionInputError(f"missing key {where}[{key!r}]", path=meta_path)
    value = container[key]
    if not isinstance(value, kind):
        raise PartitionInputError(
            f"{where}[{key!r}] must be a JSON {'object' if kind is dict else 'list'}",
            path=meta_path,
        )
    return value


def _data_files(
    spec: Any, where: str, formats: tuple[str, ...], num_chunks: int, base: str, meta_path: str
) -> tuple[list[str], dict[str, Any]]:
    """Resolve one ``{"format": ..., "data": [...]}`` entry to existing chunk file paths."""
    if not isinstance(spec, dict):
        raise PartitionInputError(f"{where} must be a JSON object", path=meta_path)
    fmt = _entry(spec, "format", where, meta_path)
    name = fmt.get("name")
    if name not in formats:
        raise PartitionInputError(
            f"{where} has format {name!r}; only {' or '.join(map(repr, formats))} is "
            "supported here",
            path=meta_path,
        )
    files = _entry(spec, "data", where, meta_path, list)
    if len(files) != num_chunks:
        raise PartitionInputError(
            f"{where} lists {len(files)} data files but the metadata gives {num_chunks} chunk "
            f"sizes for it",
            path=meta_path,
        )
    resolved = []
    for file in files:
        if not isinstance(file, str) or not file:
            raise PartitionInputError(f"{where}['data'] must list file paths", path=meta_path)
        full = file if os.path.isabs(file) else os.path.join(base, file)
        if not os.path.isfile(full):
            raise PartitionInputError(
                f"chunk file listed in {where} is missing",
                path=full,
                hint=f"paths are relative to the folder of {meta_path}",
            )
        resolved.append(full)
    return resolved, fmt


FeatureSpec = tuple[list[str], dict[str, Any], list[int]]  # chunk files, format, chunk sizes


def _feature_specs(
    section: Any, section_name: str, known: dict[str, list[int]], base: str, meta_path: str,
) -> dict[str, dict[str, FeatureSpec]]:
    """node_data / edge_data checked: type -> feature -> its chunk files, format and sizes."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise PartitionInputError(f"{section_name!r} must be a JSON object", path=meta_path)
    result: dict[str, dict[str, FeatureSpec]] = {}
    for type_name, feats in section.items():
        if type_name not in known:
            raise PartitionInputError(
                f"{section_name!r} refers to unknown type {type_name!r}; known: "
                f"{', '.join(known) or 'none'}",
                path=meta_path,
            )
        if not isinstance(feats, dict):
            raise PartitionInputError(
                f"{section_name}[{type_name!r}] must map feature names to file lists",
                path=meta_path,
            )
        sizes = known[type_name]
        result[type_name] = {}
        for feat, spec in feats.items():
            where = f"{section_name}[{type_name!r}][{feat!r}]"
            files, fmt = _data_files(spec, where, FEATURE_FORMATS, len(sizes), base, meta_path)
            result[type_name][feat] = (files, fmt, sizes)
    return result


def feature_chunk(file: str, fmt: dict[str, Any], size: int, name: str) -> np.ndarray:
    """One chunk of feature ``name`` (``type/feature``), checked to hold ``size`` rows."""
    arr = read_feature_chunk(file, fmt)
    if not isinstance(arr, np.ndarray) or arr.ndim == 0 or arr.shape[0] != size:
        rows = arr.shape[0] if isinstance(arr, np.ndarray) and arr.ndim else 0
        raise PartitionInputError(
            f"feature {name} chunk has {rows} rows but the metadata says the chunk has {size}",
            path=file,
        )
    return arr


def _read_features(
    specs: dict[str, dict[str, FeatureSpec]], section_name: str, meta_path: str,
    spill: SpillFolder | None,
) -> dict[str, dict[str, np.ndarray]]:
    """Read node_data / edge_data: type -> feature -> concatenated ``.npy`` chunks (one chunk:
    that chunk's mapping; several: a :class:`Column`, in ``spill`` once large)."""
    result: dict[str, dict[str, np.ndarray]] = {}
    for type_name, feats in specs.items():
        result[type_name] = {}
        for feat, (files, fmt, sizes) in feats.items():
            where = f"{section_name}[{type_name!r}][{feat!r}]"
            made: list[Column] = []  # the one column, once the first chunk gives its dtype
            with discarded_on_error(made):
                for file, size in zip(files, sizes, strict=True):
                    arr = feature_chunk(file, fmt, size, f"{type_name}/{feat}")
                    if not made:
                        made.append(Column(arr.dtype, arr.shape[1:], spill))
                    elif (arr.dtype, arr.shape[1:]) != (made[0].dtype, made[0].row_shape):
                        raise PartitionInputError(
                            f"the chunks of {where} disagree on dtype or row shape",
                            path=meta_path,
                        )
                    made[0].append(arr)
                    del arr
            # _data_files: one file per chunk, and there is at least one
            result[type_name][feat] = made[0].finish()
    return result


@dataclass
class ChunkedLayout:
    """A chunked graph's metadata, checked: types, counts, and every chunk file.

    Attributes:
        meta_path: the metadata file.
        num_nodes: node type -> count (the dict order is the type order).
        node_chunks: per node type, its chunk sizes.
        etypes: the canonical edge types, in order.
        edges: per edge type, its chunk files, format and chunk sizes.
        ndata / edata: per type key (node type / edge type key), feature -> its chunks.
    """

    meta_path: str
    num_nodes: dict[str, int]
    node_chunks: list[list[int]]
    etypes: list[CanonicalEtype]
    edges: list[FeatureSpec]
    ndata: dict[str, dict[str, FeatureSpec]]
    edata: dict[str, dict[str, FeatureSpec]]


def chunked_layout(folder_or_metadata_json: str | os.PathLike) -> ChunkedLayout:
    """Read and check a chunked graph's metadata (every chunk file must exist); raises
    PartitionInputError naming the metadata or the missing file. Reads no chunk."""
    meta_path = _find_metadata(os.fspath(folder_or_metadata_json))
    base = os.path.dirname(os.path.abspath(meta_path))
    meta = _load_metadata(meta_path)
    if not isinstance(meta["graph_name"], str):
        raise PartitionInputError("'graph_name' must be a string", path=meta_path)
    ntypes = _str_list(meta, "node_type", meta_path)
    if not ntypes:
        raise PartitionInputError("'node_type' lists no node types", path=meta_path)
    node_chunks = _chunk_sizes(meta, "num_nodes_per_chunk", ntypes, meta_path)
    num_nodes = {t: int(sum(sizes)) for t, sizes in zip(ntypes, node_chunks, strict=True)}

    etype_names = _str_list(meta, "edge_type", meta_path)
    etypes: list[CanonicalEtype] = []
    for key in etype_names:
        try:
            etype = parse_etype_key(key)
        except ValueError as exc:
            raise PartitionInputError(f"in 'edge_type': {exc}", path=meta_path) from exc
        for end, ntype in (("source", etype[0]), ("destination", etype[2])):
            if ntype not in num_nodes:
                raise PartitionInputError(
                    f"edge type {key!r} names unknown {end} node type {ntype!r}; "
                    f"'node_type' lists: {', '.join(ntypes)}",
                    path=meta_path,
                )
        etypes.append(etype)
    edge_chunks = _chunk_sizes(meta, "num_edges_per_chunk", etype_names, meta_path)

    edges_section = meta["edges"]
    if not isinstance(edges_section, dict):
        raise PartitionInputError(
            "'edges' must be a JSON object keyed by edge type", path=meta_path
        )
    unknown = [k for k in edges_section if k not in etype_names]
    if unknown:
        raise PartitionInputError(
            f"'edges' has unknown edge type {unknown[0]!r}; 'edge_type' lists: "
            f"{', '.join(etype_names) or 'none'}",
            path=meta_path,
        )
    edges: list[FeatureSpec] = []
    for key, sizes in zip(etype_names, edge_chunks, strict=True):
        spec = _entry(edges_section, key, "edges", meta_path)
        files, fmt = _data_files(spec, f"edges[{key!r}]", EDGE_FORMATS, len(sizes), base,
                                 meta_path)
        edges.append((files, fmt, sizes))
    node_known = dict(zip(ntypes, node_chunks, strict=True))
    edge_known = dict(zip(etype_names, edge_chunks, strict=True))
    return ChunkedLayout(
        meta_path, num_nodes, node_chunks, etypes, edges,
        _feature_specs(meta.get("node_data"), "node_data", node_known, base, meta_path),
        _feature_specs(meta.get("edge_data"), "edge_data", edge_known, base, meta_path),
    )


def read_edges_chunk(layout: ChunkedLayout, e: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k`` of edge type ``e``: its ``(src, dst)`` int64 arrays, checked (count, ids)."""
    etype = layout.etypes[e]
    files, fmt, sizes = layout.edges[e]
    ends = (Column(np.int64), Column(np.int64))
    read_edge_chunk(files[k], fmt, key=etype_key(etype), size=sizes[k],
                    limits=(layout.num_nodes[etype[0]], layout.num_nodes[etype[2]]),
                    node_types=(etype[0], etype[2]), meta_path=layout.meta_path, into=ends)
    return ends[0].finish(), ends[1].finish()


def read_chunked(
    folder_or_metadata_json: str | os.PathLike, *, spill: SpillFolder | None = None
) -> Graph:
    """Read a graph in DGL's chunked format from its folder or its ``metadata.json``.

    Edge chunks are ``src dst`` text lines (``"format": {"name": "csv"}``, gzip or zstd
    compressed or not) or Parquet files (``"parquet"``: columns src/dst, else the first two) in
    per-type node ids; features are one ``.npy`` (``"numpy"``) or Parquet file per chunk in id
    order. Paths in the metadata are relative to its folder. Text chunks are parsed a part at
    a time; with ``spill`` each edge column and feature of several chunks goes to a
    memory-mapped file there once it grows large. Raises
    PartitionInputError naming the metadata or chunk file (and line, for edge lines).
    """
    layout = chunked_layout(folder_or_metadata_json)
    meta_path = layout.meta_path
    num_nodes = layout.num_nodes
    edges: dict[CanonicalEtype, tuple[np.ndarray, np.ndarray]] = {}
    for etype, (files, fmt, sizes) in zip(layout.etypes, layout.edges, strict=True):
        key = etype_key(etype)
        ends = (Column(np.int64, folder=spill), Column(np.int64, folder=spill))
        with discarded_on_error(ends):
            for file, size in zip(files, sizes, strict=True):
                read_edge_chunk(
                    file, fmt, key=key, size=size,
                    limits=(num_nodes[etype[0]], num_nodes[etype[2]]),
                    node_types=(etype[0], etype[2]), meta_path=meta_path, into=ends,
                )
        edges[etype] = (ends[0].finish(), ends[1].finish())
    ndata = _read_features(layout.ndata, "node_data", meta_path, spill)
    edata_by_key = _read_features(layout.edata, "edge_data", meta_path, spill)
    graph = Graph(
        num_nodes=num_nodes,
        edges=edges,
        ndata={t: ndata.get(t, {}) for t in num_nodes},
        edata={e: edata_by_key.get(etype_key(e), {}) for e in layout.etypes},
    )
    graph.validate(meta_path)
    return graph


def _chunk_bounds(total: int, num_chunks: int) -> np.ndarray:
    """DGL's split: the first ``total % k`` chunks get one extra row."""
    sizes = np.full(num_chunks, total // num_chunks, dtype=np.int64)
    sizes[: total % num_chunks] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _safe_names(names: list[str]) -> list[str]:
    """File-system-safe, distinct names; a type index is prepended only where needed."""
    safe = [re.sub(r"[^A-Za-z0-9_.-]+", "_", n).strip(".") or "_" for n in names]
    if len(set(safe)) != len(safe):
        safe = [f"{i}_{s}" for i, s in enumerate(safe)]
    return safe


def _write_features(
    writer: ShardWriter, section: str, type_dir: str, feats: dict[str, np.ndarray],
    bounds: np.ndarray,
) -> dict[str, Any]:
    # ShardWriter, not np.save: numpy's tofile reports a full disk without its errno.
    specs: dict[str, Any] = {}
    names = list(feats)
    for feat, safe in zip(names, _safe_names(names), strict=True):
        files = [
            writer.save(f"{section}/{type_dir}/{safe}.{j}.npy", feats[feat][lo:hi])
            for j, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
        ]
        specs[feat] = {"format": {"name": "numpy"}, "data": files}
    return specs


def _fill_chunked(writer: ShardWriter, graph: Graph, graph_name: str, num_chunks: int) -> None:
    """Write every chunk file and metadata.json under ``writer.root``."""
    root = writer.root
    meta: dict[str, Any] = {
        "graph_name": graph_name,
        "node_type": graph.ntypes,
        "num_nodes_per_chunk": [],
        "edge_type": [etype_key(e) for e in graph.canonical_etypes],
        "num_edges_per_chunk": [],
        "edges": {},
        "node_data": {},
        "edge_data": {},
    }
    for ntype, safe in zip(graph.ntypes, _safe_names(graph.ntypes), strict=True):
        bounds = _chunk_bounds(graph.num_nodes[ntype], num_chunks)
        meta["num_nodes_per_chunk"].append(np.diff(bounds).tolist())
        feats = graph.ndata.get(ntype, {})
        if feats:
            meta["node_data"][ntype] = _write_features(writer, "node_data", safe, feats, bounds)
    keys = meta["edge_type"]
    for etype, key, safe in zip(graph.canonical_etypes, keys, _safe_names(keys), strict=True):
        src, dst = graph.edges[etype]
        bounds = _chunk_bounds(len(src), num_chunks)
        meta["num_edges_per_chunk"].append(np.diff(bounds).tolist())
        files = []
        (root / "edges").mkdir(exist_ok=True)
        for j in range(num_chunks):
            rel = f"edges/{safe}.{j}.txt"
            with open(root / rel, "wb") as fh:
                lo, hi = int(bounds[j]), int(bounds[j + 1])
                write_edge_lines(fh, src[lo:hi], dst[lo:hi], " ")
            files.append(rel)
        meta["edges"][key] = {"format": {"name": "csv", "delimiter": " "}, "data": files}
        feats = graph.edata.get(etype, {})
        if feats:
            meta["edge_data"][key] = _write_features(writer, "edge_data", safe, feats, bounds)
    with open(root / "metadata.json", "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")


def write_chunked(
    graph: Graph,
    folder: str | os.PathLike,
    graph_name: str,
    num_chunks: int = 2,
    *,
    overwrite: bool = False,
) -> Path:
    """Write ``graph`` in DGL's chunked format into ``folder`` and return the metadata path.

    Everything is written into a temporary sibling folder first and renamed into place, so
    ``folder`` never holds a half-written graph; the temporary folders of dead runs go first.
    An existing non-empty ``folder`` raises OutputExistsError unless ``overwrite``, a full disk
    or quota OutputWriteError (with nothing left behind).
    """
    if isinstance(num_chunks, bool) or not isinstance(num_chunks, int) or num_chunks < 1:
        raise PartitionOptionError(f"num_chunks must be an integer >= 1 (got {num_chunks!r})")
    if not graph_name:
        raise PartitionOptionError("graph_name must not be empty")
    target = Path(os.fspath(folder)).resolve()
    graph.validate(str(target))
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        if not overwrite:
            raise OutputExistsError(f"{target}: already exists", hint="pass overwrite=True")
        if not target.is_dir():
            raise OutputExistsError(f"{target}: exists and is not a folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    # The PID in the name lets a later run tell whether the writer is still alive.
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-{os.getpid()}-"))
    old: Path | None = None
    try:
        _fill_chunked(ShardWriter(tmp, output=target), graph, graph_name, num_chunks)
        if target.exists():
            # Move the old folder aside first: a rename cannot replace a non-empty folder.
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not target.exists():
            os.replace(old, target)
        error = out_of_space_error(exc, target) if isinstance(exc, OSError) else None
        if error is not None:
            raise error from exc
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target / "metadata.json"


def open_chunked(source: str | os.PathLike | ChunkedLayout) -> Graph:
    """A chunked graph whose edge and feature arrays read their chunk files only when
    sliced (:class:`~partitioner.readers.chunk_rows.ChunkRows`): a rank of the distributed
    partitioner reads the chunks its share overlaps and no other. The metadata is checked
    now; each chunk when it is read (its count, and edge ids against the node counts)."""
    from .chunk_rows import ChunkRows

    layout = source if isinstance(source, ChunkedLayout) else chunked_layout(source)
    edges: dict[CanonicalEtype, tuple[np.ndarray, np.ndarray]] = {}
    empty = np.empty(0, np.int64)
    for e, (etype, (_, _, sizes)) in enumerate(zip(layout.etypes, layout.edges, strict=True)):
        both = ChunkRows(sizes, functools.partial(_stacked_edges, layout, e),
                         like=np.empty((0, 0), np.int64))
        # One read per chunk serves both ends: the source's slice, then the destination's.
        src = ChunkRows(sizes, functools.partial(_end_of, both, 0), like=empty)
        dst = ChunkRows(sizes, functools.partial(_end_of, both, 1), like=empty)
        edges[etype] = (src, dst)  # type: ignore[assignment]

    def lazy(specs: dict[str, FeatureSpec], type_name: str) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for feat, (files, fmt, sizes) in specs.items():
            name = f"{type_name}/{feat}"
            out[feat] = ChunkRows(  # type: ignore[assignment]
                sizes, functools.partial(_feature_of, files, fmt, sizes, name))
        return out

    return Graph(
        num_nodes=dict(layout.num_nodes),
        edges=edges,
        ndata={t: lazy(layout.ndata.get(t, {}), t) for t in layout.num_nodes},
        edata={et: lazy(layout.edata.get(etype_key(et), {}), etype_key(et))
               for et in layout.etypes},
    )


def _stacked_edges(layout: ChunkedLayout, e: int, k: int) -> np.ndarray:
    return np.stack(read_edges_chunk(layout, e, k))


def _end_of(both: Any, end: int, k: int) -> np.ndarray:
    return np.asarray(both.chunk(k)[end])


def _feature_of(files: list[str], fmt: dict[str, Any], sizes: list[int], name: str,
                k: int) -> np.ndarray:
    return feature_chunk(files[k], fmt, sizes[k], name)
