"""Graph input readers (npz, text edge lists, DGL chunked, OGB folders, scipy matrices, Parquet)
behind one ``read_graph`` entry point."""

from __future__ import annotations

import contextlib
import os

from ..errors import PartitionInputError, PartitionOptionError
from ..graph import Graph
from ..spill import SpillFolder
from .chunked import METADATA_NAMES, read_chunked, write_chunked
from .compressed import COMPRESSED_SUFFIXES, strip_compression_suffix
from .npz import read_npz, write_npz
from .ogb import ogb_root, read_ogb
from .parquet import read_parquet_edges
from .scipy_npz import is_scipy_npz, read_scipy_npz
from .text import read_edge_list
from .text_writer import write_edge_list

FORMATS = ("npz", "text", "chunked", "ogb", "scipy", "parquet")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".el")
PARQUET_SUFFIXES = (".parquet", ".pq")
# The options each format takes; every other format carries its own node count and features.
FORMAT_OPTIONS = {
    "text": ("delimiter", "node_data", "num_nodes"),
    "parquet": ("node_data", "num_nodes"),
    "scipy": ("node_data",),
    "ogb": ("split",),
}
_FORMAT_HINT = (
    "formats: npz (.npz with src/dst or indptr/indices), scipy (.npz from "
    "scipy.sparse.save_npz), text (edge list: " + ", ".join(TEXT_SUFFIXES)
    + ", optionally " + "/".join(COMPRESSED_SUFFIXES) + "), parquet (.parquet edge list), "
    "chunked (a folder with metadata.json, or the metadata.json itself), ogb (an OGB dataset "
    "folder with raw/edge.csv.gz); pass fmt= to choose one explicitly"
)

__all__ = [
    "FORMATS",
    "detect_format",
    "read_chunked",
    "read_edge_list",
    "read_graph",
    "read_npz",
    "read_ogb",
    "read_parquet_edges",
    "read_scipy_npz",
    "write_chunked",
    "write_edge_list",
    "write_npz",
]


def detect_format(path: str | os.PathLike) -> str:
    """Guess the input format from the path: an OGB dataset folder (``raw/edge.csv.gz``) ->
    ogb, another folder or ``*.json`` -> chunked, ``.npz`` -> scipy when it holds scipy's
    ``format``/``shape`` arrays else npz, ``.parquet`` -> parquet, edge-list suffixes (also
    with ``.gz`` / ``.zst``) -> text. Raises PartitionInputError if missing or unknown."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise PartitionInputError("no such file", path=path, hint=_FORMAT_HINT)
    if os.path.isdir(path):
        return "ogb" if ogb_root(path) else "chunked"
    name = os.path.basename(path).lower()
    if name in METADATA_NAMES or name.endswith(".json"):
        return "chunked"
    if name.endswith(".npz"):
        return "scipy" if is_scipy_npz(path) else "npz"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if strip_compression_suffix(name).endswith(TEXT_SUFFIXES):
        return "text"
    suffix = os.path.splitext(name)[1] or "(none)"
    raise PartitionInputError(
        f"cannot tell the graph format from the file extension {suffix}",
        path=path,
        hint=_FORMAT_HINT,
    )


# Parsed arrays per byte of input: int64 pairs take 16 bytes per edge line of about 11 or more
# characters; a compressed file holds about 4 times its size.
_PARSED_PER_BYTE = 1.5
_COMPRESSION_RATIO = 4
STREAMED_FORMATS = ("text", "chunked", "ogb")


def parsed_bytes_estimate(path: str | os.PathLike, fmt: str | None = None) -> int:
    """About how many bytes of arrays reading ``path`` builds, for the formats whose reader
    parses (:data:`STREAMED_FORMATS`; 0 for the others, which map their input): what deciding
    where the parse goes weighs. Every file of a folder input is counted."""
    path = os.fspath(path)
    if (fmt or detect_format(path)) not in STREAMED_FORMATS:
        return 0
    if os.path.isdir(path):
        files = [os.path.join(d, f) for d, _, names in os.walk(path) for f in names]
    elif os.path.basename(path).lower() in METADATA_NAMES or path.lower().endswith(".json"):
        folder = os.path.dirname(os.path.abspath(path))
        files = [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]
    else:
        files = [path]
    total = 0
    for file in files:
        with contextlib.suppress(OSError):
            size = os.path.getsize(file)
            total += size * (_COMPRESSION_RATIO if strip_compression_suffix(file) != file else 1)
    return int(total * _PARSED_PER_BYTE)


def read_graph(
    path: str | os.PathLike,
    *,
    fmt: str | None = None,
    delimiter: str | None = None,
    node_data: dict[str, str] | None = None,
    num_nodes: int | None = None,
    split: str | None = None,
    spill: SpillFolder | None = None,
) -> Graph:
    """Read a graph in any supported format and validate it.

    ``fmt`` is one of :data:`FORMATS`, or ``None`` to detect it from the path. Options apply to
    the formats :data:`FORMAT_OPTIONS` lists: ``delimiter`` to text edge lists, ``node_data``
    (name -> ``.npy`` file) to text, parquet and scipy, ``num_nodes`` to text and parquet,
    ``split`` (the folder under ``split/``) to OGB; giving one for another format raises
    PartitionOptionError. Input problems raise PartitionInputError naming the file.
    ``spill`` (a folder the caller removes afterwards) lets the text, chunked and OGB readers
    put the edges and features they parse in memory-mapped files once they grow large, so
    that the read holds a chunk at a time instead of the whole input.
    """
    path = os.fspath(path)
    if fmt is not None and fmt not in FORMATS:
        raise PartitionOptionError(
            f"unknown graph format {fmt!r}; choose one of {', '.join(FORMATS)}"
        )
    if not os.path.exists(path):
        raise PartitionInputError("no such file", path=path)
    fmt = fmt or detect_format(path)
    options = {"delimiter": delimiter, "node_data": node_data, "num_nodes": num_nodes,
               "split": split}
    given = [k for k, v in options.items()
             if v is not None and k not in FORMAT_OPTIONS.get(fmt, ())]
    if given:
        takers = sorted({f for f in FORMAT_OPTIONS for k in given if k in FORMAT_OPTIONS[f]})
        raise PartitionOptionError(
            f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} to "
            f"{' and '.join(takers)} input, not to {fmt} input",
            hint=f"{fmt} input takes only {', '.join(FORMAT_OPTIONS[fmt])}" if fmt in
            FORMAT_OPTIONS else f"{fmt} input carries its own node count and features",
        )
    if fmt == "npz":
        if is_scipy_npz(path):
            raise PartitionInputError(
                "is a scipy.sparse.save_npz matrix (it has 'format' and 'shape' arrays), not "
                "dglctl's npz layout", path=path, hint="read it with --format scipy (or auto)",
            )
        graph = read_npz(path)
    elif fmt == "scipy":
        graph = read_scipy_npz(path, node_data=node_data)
    elif fmt == "chunked":
        graph = read_chunked(path, spill=spill)
    elif fmt == "ogb":
        graph = read_ogb(path, split=split, spill=spill)
    elif fmt == "parquet":
        graph = read_parquet_edges(path, num_nodes=num_nodes, node_data=node_data)
    else:
        graph = read_edge_list(path, delimiter=delimiter, num_nodes=num_nodes, node_data=node_data,
                               spill=spill)
    graph.validate(path)
    return graph
