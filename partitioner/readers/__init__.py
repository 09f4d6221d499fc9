"""Graph input readers (npz, text edge lists, DGL chunked) behind one ``read_graph`` entry point."""

from __future__ import annotations

import os

from ..errors import PartitionInputError, PartitionOptionError
from ..graph import Graph
from .chunked import METADATA_NAMES, read_chunked, write_chunked
from .npz import read_npz, write_npz
from .text import read_edge_list
from .text_writer import write_edge_list

FORMATS = ("npz", "text", "chunked")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".edges", ".el")
_FORMAT_HINT = (
    "formats: npz (.npz with src/dst or indptr/indices), text (edge list: "
    + ", ".join(TEXT_SUFFIXES)
    + "), chunked (a folder with metadata.json, or the metadata.json itself); "
    "pass fmt= to choose one explicitly"
)

__all__ = [
    "FORMATS",
    "detect_format",
    "read_chunked",
    "read_edge_list",
    "read_graph",
    "read_npz",
    "write_chunked",
    "write_edge_list",
    "write_npz",
]


def detect_format(path: str | os.PathLike) -> str:
    """Guess the input format from the path: folder or ``*.json`` -> chunked, ``.npz`` -> npz,
    edge-list suffixes -> text. Raises PartitionInputError if the path is missing or unknown."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise PartitionInputError("no such file", path=path, hint=_FORMAT_HINT)
    if os.path.isdir(path):
        return "chunked"
    name = os.path.basename(path).lower()
    if name in METADATA_NAMES or name.endswith(".json"):
        return "chunked"
    if name.endswith(".npz"):
        return "npz"
    if name.endswith(TEXT_SUFFIXES):
        return "text"
    suffix = os.path.splitext(name)[1] or "(none)"
    raise PartitionInputError(
        f"cannot tell the graph format from the file extension {suffix}",
        path=path,
        hint=_FORMAT_HINT,
    )


def read_graph(
    path: str | os.PathLike,
    *,
    fmt: str | None = None,
    delimiter: str | None = None,
    node_data: dict[str, str] | None = None,
    num_nodes: int | None = None,
) -> Graph:
    """Read a graph in any supported format and validate it.

    ``fmt`` is one of ``npz``, ``text``, ``chunked``, or ``None`` to detect it from the path.
    ``delimiter``, ``node_data`` and ``num_nodes`` apply to text edge lists only; giving them
    for another format raises PartitionOptionError. Input problems raise PartitionInputError
    naming the file.
    """
    path = os.fspath(path)
    if fmt is not None and fmt not in FORMATS:
        raise PartitionOptionError(
            f"unknown graph format {fmt!r}; choose one of {', '.join(FORMATS)}"
        )
    if not os.path.exists(path):
        raise PartitionInputError("no such file", path=path)
    fmt = fmt or detect_format(path)
    if fmt != "text":
        given = [
            name
            for name, value in (
                ("delimiter", delimiter),
                ("node_data", node_data),
                ("num_nodes", num_nodes),
            )
            if value is not None
        ]
        if given:
            raise PartitionOptionError(
                f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} to text edge "
                f"lists, not to {fmt} input",
                hint=f"{fmt} input carries its own node count and features",
            )
    if fmt == "npz":
        graph = read_npz(path)
    elif fmt == "chunked":
        graph = read_chunked(path)
    else:
        graph = read_edge_list(path, delimiter=delimiter, num_nodes=num_nodes, node_data=node_data)
    graph.validate(path)
    return graph
