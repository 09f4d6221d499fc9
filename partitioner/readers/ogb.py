"""Reading an OGB node property prediction dataset folder (e.g. ogbn-arxiv) as OGB stores it.

The layout: ``raw/edge.csv.gz`` (``src,dst`` per line, no header), optional
``raw/num-node-list.csv.gz``, ``raw/num-edge-list.csv.gz``, ``raw/node-feat.csv.gz``,
``raw/edge-feat.csv.gz``, ``raw/node-label.csv.gz`` and ``raw/node_NAME.csv.gz`` (OGB's
additional node files), and ``split/NAME/{train,valid,test}.csv.gz`` (node ids, one per line).
Node data is named as DGL's ``DglNodePropPredDataset`` plus the usual masks: ``feat``,
``label``, ``NAME``, ``train_mask`` / ``val_mask`` / ``test_mask``; edge data ``feat``.
Every file is parsed by numpy in bulk, decompressed on the fly (``compressed.open_text``).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from ..errors import PartitionInputError, PartitionOptionError
from ..graph import Graph
from ..inputs import id_space_too_sparse, sparse_ids_error
from ..spill import SpillFolder
from .compressed import open_text
from .text import check_id_range, parse_edge_columns

EDGE_FILE = "edge"
# split file stem -> node data name (the masks every other reader and the generator produce)
SPLIT_MASKS = {"train": "train_mask", "valid": "val_mask", "test": "test_mask"}
_SUFFIXES = (".csv.gz", ".csv.zst", ".csv")
_HETERO_MARKERS = ("triplet-type-list.csv.gz", "relations", "num-node-dict.csv.gz")
_FLOAT_CHARS = frozenset(".eEnNiI")  # a decimal point, an exponent, nan or inf


def _find(folder: str, stem: str) -> str | None:
    """``folder/stem.csv.gz`` (or ``.csv.zst`` / ``.csv``) if it exists."""
    for suffix in _SUFFIXES:
        candidate = os.path.join(folder, stem + suffix)
        if os.path.isfile(candidate):
            return candidate
    return None


def ogb_root(path: str | os.PathLike) -> str | None:
    """The dataset folder if ``path`` is one (it has ``raw/edge.csv.gz``) or is its ``raw/``
    folder; ``None`` otherwise."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isdir(path):
        return None
    if _find(os.path.join(path, "raw"), EDGE_FILE):
        return path
    if os.path.basename(path) == "raw" and _find(path, EDGE_FILE):
        return os.path.dirname(path)
    return None


def _read_numbers(file: str, what: str) -> np.ndarray:
    """A comma-separated numeric table as a 2-D array: int64 when the first line holds only
    integers (as pandas infers it for OGB), else float32; NaN entries make it float32."""
    with open_text(file, what=f"an OGB {what} CSV file") as fh:
        first = fh.readline()
    looks_float = bool(_FLOAT_CHARS & set(first))
    for dtype in ((np.float64,) if looks_float else (np.int64, np.float64)):
        try:
            with warnings.catch_warnings(), open_text(file, what=f"an OGB {what} CSV file") as fh:
                warnings.filterwarnings("ignore", message=".*input contained no data.*")
                table = np.loadtxt(fh, delimiter=",", dtype=dtype, ndmin=2, comments=None)
        except ValueError as exc:
            if dtype is np.int64:
                continue  # a later line holds a float or nan: read the whole file as floats
            raise PartitionInputError(
                f"cannot parse the {what} file: {exc}", path=file,
                hint="OGB CSV files hold comma-separated numbers, no header",
            ) from exc
        return table if dtype is np.int64 else table.astype(np.float32)
    raise AssertionError("unreachable")


def _node_count(raw: str, src: np.ndarray, dst: np.ndarray, rows: dict[str, int]) -> int:
    """From num-node-list (one graph only), else the node file rows, else largest id + 1."""
    listed = _find(raw, "num-node-list")
    if listed is not None:
        counts = _read_numbers(listed, "node count").ravel()
        if counts.size != 1:
            raise PartitionInputError(
                f"lists {counts.size} graphs: only a single-graph dataset (node property "
                "prediction, ogbn-*) can be partitioned",
                path=listed,
            )
        return int(counts[0])
    if rows:
        return max(rows.values())
    n = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if id_space_too_sparse(n, len(src)):
        raise sparse_ids_error(n - 1, len(src), path=os.path.join(raw, "edge.csv.gz"))
    return n


def _choose_split(root: str, split: str | None) -> str | None:
    """The split folder to read: the only one, or ``split``; ``None`` if there is none."""
    split_dir = os.path.join(root, "split")
    names = sorted(
        name for name in (os.listdir(split_dir) if os.path.isdir(split_dir) else [])
        if any(_find(os.path.join(split_dir, name), stem) for stem in SPLIT_MASKS)
    )
    if split is not None:
        if split not in names:
            raise PartitionOptionError(
                f"OGB dataset {root} has no split {split!r}; its splits: "
                f"{', '.join(names) or 'none'}"
            )
        return os.path.join(split_dir, split)
    if len(names) > 1:
        raise PartitionOptionError(
            f"OGB dataset {root} has {len(names)} splits: {', '.join(names)}; choose one "
            f"with --split NAME (split= in read_graph)"
        )
    return os.path.join(split_dir, names[0]) if names else None


def _split_masks(folder: str, n: int) -> dict[str, np.ndarray]:
    """``train_mask`` / ``val_mask`` / ``test_mask`` from the id files of one split folder."""
    masks: dict[str, np.ndarray] = {}
    for stem, name in SPLIT_MASKS.items():
        file = _find(folder, stem)
        if file is None:
            continue
        ids = _read_numbers(file, f"{stem} split").ravel()
        if not np.issubdtype(ids.dtype, np.integer):
            raise PartitionInputError("split files hold integer node ids, one per line",
                                      path=file)
        bad = (ids < 0) | (ids >= n)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise PartitionInputError(
                f"node id {int(ids[at])} on line {at + 1} is out of range: the graph has {n} "
                f"nodes (ids 0..{n - 1})",
                path=file, line=at + 1,
            )
        mask = np.zeros(n, dtype=bool)
        mask[ids] = True
        masks[name] = mask
    return masks


def _node_files(raw: str) -> dict[str, str]:
    """Node data name -> file: ``feat``, ``label`` and OGB's additional ``node_NAME`` files."""
    files = {name: _find(raw, stem) for name, stem in (("feat", "node-feat"),
                                                        ("label", "node-label"))}
    for entry in sorted(os.listdir(raw)):
        stem = entry.split(".csv", 1)[0]
        if stem.startswith("node_") and len(stem) > 5 and entry.endswith(_SUFFIXES):
            files.setdefault(stem[5:], os.path.join(raw, entry))
    return {name: file for name, file in files.items() if file is not None}


def read_ogb(
    path: str | os.PathLike, *, split: str | None = None, spill: SpillFolder | None = None
) -> Graph:
    """Read an OGB node property prediction dataset folder (or its ``raw/`` folder).

    Edges are read as stored, one directed edge per line (OGB's loaders add the reverse edges
    of some datasets, e.g. ogbn-products, themselves). ``split`` names the folder under
    ``split/`` when there are several. The edges are parsed a part at a time; with ``spill``
    they go to memory-mapped files there once large. Raises PartitionInputError naming the file (and line)
    of anything unreadable or inconsistent, PartitionOptionError for a missing ``split``.
    """
    given = os.fspath(path)
    root = ogb_root(given)
    if root is None:
        raise PartitionInputError(
            "not an OGB dataset folder: no raw/edge.csv.gz", path=given,
            hint="pass the dataset folder OGB downloaded (e.g. dataset/ogbn_arxiv), the one "
                 "holding raw/ and split/",
        )
    raw = os.path.join(root, "raw")
    hetero = [m for m in _HETERO_MARKERS if os.path.exists(os.path.join(raw, m))]
    if hetero:
        raise PartitionInputError(
            f"is a heterogeneous OGB dataset (raw/{hetero[0]}, as ogbn-mag): only homogeneous "
            "ones are read", path=root,
            hint="convert it to DGL's chunked format (a folder with metadata.json) and pass that",
        )
    edge_file = _find(raw, EDGE_FILE)
    assert edge_file is not None
    # OGB files hold no comments: comment=None keeps numpy's parser off its per-line path.
    src, dst, _, layout = parse_edge_columns(edge_file, delimiter=",", comment=None,
                                             allow_header=False, read_weight=False,
                                             spill=spill)
    ndata = {name: _read_numbers(file, f"node {name}")
             for name, file in _node_files(raw).items()}
    ndata = {name: arr.ravel() if arr.shape[1:] == (1,) else arr for name, arr in ndata.items()}
    n = _node_count(raw, src, dst, {name: len(arr) for name, arr in ndata.items()})
    check_id_range(edge_file, layout, None, src, dst, (n, n))
    for name, arr in ndata.items():
        if len(arr) != n:
            raise PartitionInputError(
                f"node {name} has {len(arr)} rows but the graph has {n} nodes",
                path=_node_files(raw)[name],
            )
    listed = _find(raw, "num-edge-list")
    if listed is not None and int(_read_numbers(listed, "edge count").sum()) != len(src):
        raise PartitionInputError(
            f"says {int(_read_numbers(listed, 'edge count').sum())} edges but "
            f"{os.path.basename(edge_file)} holds {len(src)}", path=listed,
        )
    edata = {}
    edge_feat = _find(raw, "edge-feat")
    if edge_feat is not None:
        feat = _read_numbers(edge_feat, "edge feature")
        if len(feat) != len(src):
            raise PartitionInputError(
                f"has {len(feat)} rows but {os.path.basename(edge_file)} holds {len(src)} "
                "edges", path=edge_feat,
            )
        edata["feat"] = feat
    split_folder = _choose_split(root, split)
    if split_folder is not None:
        ndata.update(_split_masks(split_folder, n))
    graph = Graph.homogeneous(src, dst, n, ndata=ndata, edata=edata)
    graph.validate(root)
    return graph
