"""Load one part of a partition folder: its CSC and out-CSR, halo, features and id mappings
(memory-mapped)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np

from .errors import OutEdgesMissing, PartitionFormatError
from .format import PartConfig, PartEntry, check_files, load_array, read_config
from .graph import parse_etype_key
from .partition_book import RangePartitionBook


class Partition:
    """One part of a partitioned graph, as a server or a test sees it.

    Local nodes are the part's owned nodes (one contiguous homogeneous id range, in order)
    followed by its halo nodes. Inner edges are stored per edge type as a CSC over the owned
    destination nodes of that type, with *global* (homogeneous, relabeled) source ids; the
    ``k``-th inner edge of type ``e`` has id ``edge_map[e][part][0] + k``. Unless written with
    ``--no-out-edges``, each part also holds per edge type an out-CSR over its owned *source*
    nodes: every edge whose source it owns, with its global destination and edge id.
    """

    def __init__(self, config: PartConfig, part_id: int) -> None:
        self.config = config
        self.part_id = part_id
        self.entry: PartEntry = config.part(part_id)
        self.book = RangePartitionBook(config, part_id)

    def _load(self, rel: str, *keys: str) -> np.ndarray:
        """The array at ``rel``, which the part entry holds under ``keys`` (named in errors)."""
        key = "".join(f"[{k!r}]" for k in (f"part-{self.part_id}", *keys))
        return load_array(self.config, rel, key=key)

    @property
    def owned_range(self) -> tuple[int, int]:
        """``[start, end)`` of the homogeneous ids this part owns."""
        b = self.book.nodes.part_bounds
        return int(b[self.part_id]), int(b[self.part_id + 1])

    @property
    def num_owned(self) -> int:
        lo, hi = self.owned_range
        return hi - lo

    @cached_property
    def halo_nids(self) -> np.ndarray:
        """Homogeneous ids of the halo nodes, hop 1 first then hop 2, each sorted."""
        rel = self.entry.halo_nids
        return self._load(rel, "halo_nids") if rel else np.empty(0, np.int64)

    @cached_property
    def local_nids(self) -> np.ndarray:
        """Global (homogeneous) id of every local node: owned, then halo."""
        lo, hi = self.owned_range
        return np.concatenate([np.arange(lo, hi, dtype=np.int64), self.halo_nids])

    @property
    def inner_node(self) -> np.ndarray:
        """True for owned local nodes."""
        flags = np.zeros(len(self.local_nids), bool)
        flags[: self.num_owned] = True
        return flags

    @property
    def node_owner(self) -> np.ndarray:
        """Owner part of every local node."""
        return self.book.nid2partid(self.local_nids)

    def csc(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, global source ids) of inner edges of canonical type ``"src:etype:dst"``."""
        files = self.entry.csc[etype]
        return (self._load(files["indptr"], "csc", etype, "indptr"),
                self._load(files["indices"], "csc", etype, "indices"))

    @property
    def has_out_edges(self) -> bool:
        """Whether this partition was written with out-edges (the default)."""
        return self.entry.has_out_edges

    def csr(self, etype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, global destination ids, global edge ids) of the out-edges of ``etype``
        (``"src:etype:dst"``) whose source this part owns; ``indptr`` runs over the part's
        owned nodes of the source type in per-type id order."""
        check_out_edges(self.config)
        files = self.entry.csr[etype]
        return tuple(self._load(files[k], "csr", etype, k)  # type: ignore[return-value]
                     for k in ("indptr", "indices", "eids"))

    def out_degrees(self, etype: str) -> np.ndarray:
        """Out-degree of each owned node of the source type of ``etype`` (per-type id order)."""
        return np.diff(np.asarray(self.csr(etype)[0], dtype=np.int64))

    def inner_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All inner edges as global ``(src, dst, eid, etype_id)`` arrays."""
        srcs, dsts, eids, types = [], [], [], []
        for key, e in self.config.etypes.items():
            indptr, indices = self.csc(key)
            dst_type = parse_etype_key(key)[2]
            dst_pt = self.book.nodes.part_ids(self.part_id, dst_type)
            dst = self.book.map_to_homo_nid(np.repeat(dst_pt, np.diff(indptr)), dst_type)
            lo = self.config.edge_map[key][self.part_id][0]
            srcs.append(np.asarray(indices))
            dsts.append(dst)
            eids.append(np.arange(lo, lo + len(indices), dtype=np.int64))
            types.append(np.full(len(indices), e, np.int32))
        return tuple(np.concatenate(a) for a in (srcs, dsts, eids, types))  # type: ignore[return-value]

    def halo_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Non-inner edges kept for 2-hop halos, as global ``(src, dst, eid)``."""
        files = self.entry.halo_edges
        if not files:
            empty = np.empty(0, np.int64)
            return empty, empty, empty
        return tuple(self._load(files[k], "halo_edges", k)  # type: ignore[return-value]
                     for k in ("src", "dst", "eids"))

    def local_graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """DGL's view: ``(src, dst)`` as local node indices, global eids and inner-edge flags.

        Needs ``halo_hops >= 1``: with 0 hops the sources of cut edges are not local nodes.
        """
        if self.config.halo_hops < 1:
            raise PartitionFormatError(
                f"{self.config.where}: local_graph() needs halo_hops >= 1 (this partition has 0)",
                hint="use inner_edges() for global ids, or re-partition with --halo-hops 1",
            )
        s1, d1, e1, _ = self.inner_edges()
        s2, d2, e2 = self.halo_edges()
        src, dst = np.concatenate([s1, s2]), np.concatenate([d1, d2])
        inner = np.concatenate([np.ones(len(s1), bool), np.zeros(len(s2), bool)])
        return self.to_local(src), self.to_local(dst), np.concatenate([e1, e2]), inner

    def to_local(self, nids: np.ndarray) -> np.ndarray:
        """Local index of global node ids (-1 where the node is neither owned nor halo)."""
        nids = np.asarray(nids, dtype=np.int64)
        lo, hi = self.owned_range
        out = np.full(len(nids), -1, np.int64)
        owned = (nids >= lo) & (nids < hi)
        out[owned] = nids[owned] - lo
        halo = self.halo_nids
        if len(halo):
            # Hops are stored one after the other, each sorted: look up in a sorted copy.
            order = np.argsort(halo, kind="stable")
            pos = np.searchsorted(halo, nids[~owned], sorter=order)
            pos = np.minimum(pos, len(halo) - 1)
            hit = halo[order[pos]] == nids[~owned]
            vals = np.where(hit, self.num_owned + order[pos], -1)
            out[~owned] = vals
        return out

    def node_feats(self) -> dict[str, np.ndarray]:
        """Owned-node features keyed ``"ntype/name"``, rows in per-type local order."""
        files = self.entry.node_feat_files
        return {k: self._load(v, "node_feat_files", k) for k, v in files.items()}

    def edge_feats(self) -> dict[str, np.ndarray]:
        """Inner-edge features keyed ``"src:etype:dst/name"``, rows in edge id order."""
        files = self.entry.edge_feat_files
        return {k: self._load(v, "edge_feat_files", k) for k, v in files.items()}


def check_out_edges(config: PartConfig) -> None:
    """Raise OutEdgesMissing unless every part of ``config`` holds its out-CSR."""
    missing = [e.part_id for e in config.parts if not e.has_out_edges]
    if missing:
        raise OutEdgesMissing(
            f"{config.where}: part(s) {', '.join(map(str, missing))} hold no out-edges "
            "(written with --no-out-edges); edge_dir='out' sampling and out_degrees need them",
            hint="re-run 'dglctl partition' without --no-out-edges "
                 "(partition_graph(..., out_edges=True))",
        )


def load_partition(
    config: str | os.PathLike[str] | PartConfig, part_id: int, *, verify: bool = False
) -> Partition:
    """Open part ``part_id`` of the partition described by ``config`` (a path or a loaded config).

    With ``verify``, the part's files are checked against their recorded checksums first.
    """
    cfg = config if isinstance(config, PartConfig) else read_config(config)
    part = Partition(cfg, part_id)
    if verify:
        check_files(cfg, [part_id])
    return part


def load_partition_book(
    config: str | os.PathLike[str] | Mapping[str, Any], part_id: int = 0
) -> tuple[RangePartitionBook, str, dict[str, int], dict[tuple[str, str, str], int]]:
    """DGL's ``load_partition_book``: ``(book, graph_name, ntypes, etypes)``, the range
    partition book as seen from part ``part_id``, the graph's name, node type -> id and
    canonical edge type -> id. ``config`` is a path, a config, or DGL's JSON as a dict."""
    cfg = PartConfig.of(config) if isinstance(config, Mapping) else read_config(config)
    book = RangePartitionBook(cfg, part_id)
    for kind, rmap in (("node_map", book.nodes), ("edge_map", book.edges)):
        flat = rmap.ranges.reshape(-1)  # part-major, then type id: never decreasing (DGL)
        if np.any(flat[1:] < flat[:-1]):
            raise ValueError(f"the {kind} is not sorted by part, then type id: {flat.tolist()}")
    etypes = {parse_etype_key(k): int(v) for k, v in cfg.etypes.items()}
    return book, cfg.graph_name, {k: int(v) for k, v in cfg.ntypes.items()}, etypes


def load_orig_ids(config: str | os.PathLike[str] | PartConfig) -> tuple[dict, dict]:
    """``(orig_nids, orig_eids)``: per type, the input id of each relabeled per-type id."""
    cfg = config if isinstance(config, PartConfig) else read_config(config)
    nids = {t: load_array(cfg, p, key=f"['orig_nids'][{t!r}]") for t, p in cfg.orig_nids.items()}
    eids = {parse_etype_key(k): load_array(cfg, p, key=f"['orig_eids'][{k!r}]")
            for k, p in cfg.orig_eids.items()}
    return nids, eids
