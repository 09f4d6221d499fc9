"""Range partition book: which part owns an id, and the homogeneous <-> per-type id mappings.

After relabeling, part ``p`` owns one contiguous range of homogeneous ids per type, and the
ranges are laid out part-major then type (DGL's scheme). Every lookup here is a vectorised
``searchsorted`` over those range boundaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph import etype_key, parse_etype_key


class RangeMap:
    """Ranges of one id kind (nodes or edges): ``ranges[p, t] = [start, end)`` in homogeneous ids."""

    def __init__(self, type_names: list[str], ranges: np.ndarray) -> None:
        self.type_names = list(type_names)
        self.type_ids = {name: i for i, name in enumerate(self.type_names)}
        self.ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, len(type_names), 2)
        self.num_parts = self.ranges.shape[0]
        counts = self.ranges[:, :, 1] - self.ranges[:, :, 0]
        # Per-type id where part p's block of type t begins (rows: parts, cols: types).
        self.typed_start = np.vstack([np.zeros((1, counts.shape[1]), np.int64), np.cumsum(counts, 0)])
        self.part_bounds = np.concatenate([self.ranges[:, 0, 0], [self.ranges[-1, -1, 1]]])
        self._block_start = self.ranges[:, :, 0].reshape(-1)
        self._block_end = self.ranges[:, :, 1].reshape(-1)

    def type_index(self, name: str | None) -> int:
        if name is None:
            if len(self.type_names) != 1:
                raise ValueError(f"a type is required; this graph has {self.type_names}")
            return 0
        try:
            return self.type_ids[name]
        except KeyError:
            raise ValueError(f"unknown type {name!r}; known: {', '.join(self.type_names)}") from None

    def total(self, name: str | None = None) -> int:
        if name is None:
            return int(self.part_bounds[-1])
        return int(self.typed_start[-1, self.type_index(name)])

    def partid(self, ids: np.ndarray, name: str | None = None) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if name is None:
            return np.searchsorted(self.part_bounds[1:], ids, side="right")
        t = self.type_index(name)
        return np.searchsorted(self.typed_start[1:, t], ids, side="right")

    def part_ids(self, part: int, name: str | None = None) -> np.ndarray:
        if name is None:
            return np.arange(self.part_bounds[part], self.part_bounds[part + 1], dtype=np.int64)
        t = self.type_index(name)
        return np.arange(self.typed_start[part, t], self.typed_start[part + 1, t], dtype=np.int64)

    def to_local(self, ids: np.ndarray, part: int, name: str | None = None) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if name is None:
            return ids - self.part_bounds[part]
        return ids - self.typed_start[part, self.type_index(name)]

    def to_per_type(self, homo_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        homo_ids = np.asarray(homo_ids, dtype=np.int64)
        block = np.searchsorted(self._block_end, homo_ids, side="right")
        ntypes = len(self.type_names)
        part, tid = np.divmod(block, ntypes)
        per_type = homo_ids - self._block_start[block] + self.typed_start[part, tid]
        return tid, per_type

    def to_homo(self, per_type_ids: np.ndarray, name: str | None = None) -> np.ndarray:
        per_type_ids = np.asarray(per_type_ids, dtype=np.int64)
        t = self.type_index(name)
        part = np.searchsorted(self.typed_start[1:, t], per_type_ids, side="right")
        return per_type_ids - self.typed_start[part, t] + self.ranges[part, t, 0]


class RangePartitionBook:
    """DGL-style range partition book over nodes and edges, built from a part config.

    Homogeneous ids are the relabeled ids the partitioner wrote; per-type ids count each type
    separately (DGL's ``map_to_per_ntype`` / ``map_to_homo_nid``).
    """

    def __init__(self, config: dict[str, Any], part_id: int = 0) -> None:
        self.ntypes = sorted(config["ntypes"], key=config["ntypes"].get)
        etype_keys = sorted(config["etypes"], key=config["etypes"].get)
        self.canonical_etypes = [parse_etype_key(k) for k in etype_keys]
        self.etypes = [c[1] for c in self.canonical_etypes]
        num_parts = int(config["num_parts"])
        nranges = np.array([config["node_map"][t] for t in self.ntypes], np.int64)  # (T, P, 2)
        eranges = np.array([config["edge_map"][k] for k in etype_keys], np.int64)
        self.nodes = RangeMap(self.ntypes, nranges.transpose(1, 0, 2).reshape(num_parts, -1, 2))
        self.edges = RangeMap(etype_keys, eranges.transpose(1, 0, 2).reshape(num_parts, -1, 2))
        self.partid = int(part_id)
        self._num_parts = num_parts

    def num_partitions(self) -> int:
        """Number of parts (= machines)."""
        return self._num_parts

    def metadata(self) -> list[dict[str, int]]:
        """Per part: machine id and number of owned nodes and edges (DGL's shape)."""
        nb, eb = self.nodes.part_bounds, self.edges.part_bounds
        return [
            {"machine_id": p, "num_nodes": int(nb[p + 1] - nb[p]), "num_edges": int(eb[p + 1] - eb[p])}
            for p in range(self._num_parts)
        ]

    def _etype_name(self, etype: str | tuple[str, str, str] | None) -> str | None:
        if etype is None:
            return None
        if isinstance(etype, tuple):
            return etype_key(etype)
        if ":" in etype:
            return etype
        matches = [c for c in self.canonical_etypes if c[1] == etype]
        if len(matches) != 1:
            raise ValueError(
                f"edge type {etype!r} is {'ambiguous' if matches else 'unknown'}; use a canonical "
                f"type, one of {[etype_key(c) for c in self.canonical_etypes]}"
            )
        return etype_key(matches[0])

    # --- nodes -----------------------------------------------------------------------------
    def nid2partid(self, nids: np.ndarray, ntype: str | None = None) -> np.ndarray:
        """Owner part of each node id (homogeneous ids, or per-type ids when ``ntype`` is given)."""
        return self.nodes.partid(nids, ntype)

    def partid2nids(self, partid: int, ntype: str | None = None) -> np.ndarray:
        """All node ids owned by ``partid`` (homogeneous, or per-type with ``ntype``)."""
        return self.nodes.part_ids(partid, ntype)

    def nid2localnid(self, nids: np.ndarray, partid: int, ntype: str | None = None) -> np.ndarray:
        """Index of each owned node within its part (per-type index when ``ntype`` is given)."""
        return self.nodes.to_local(nids, partid, ntype)

    def map_to_per_ntype(self, nids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous node ids -> (node type ids, per-type ids)."""
        return self.nodes.to_per_type(nids)

    def map_to_homo_nid(self, ids: np.ndarray, ntype: str) -> np.ndarray:
        """Per-type node ids of ``ntype`` -> homogeneous ids."""
        return self.nodes.to_homo(ids, ntype)

    def num_nodes(self, ntype: str | None = None) -> int:
        return self.nodes.total(ntype)

    # --- edges -----------------------------------------------------------------------------
    def eid2partid(self, eids: np.ndarray, etype: str | tuple[str, str, str] | None = None) -> np.ndarray:
        """Owner part of each edge id (homogeneous, or per-type with ``etype``)."""
        return self.edges.partid(eids, self._etype_name(etype))

    def partid2eids(self, partid: int, etype: str | tuple[str, str, str] | None = None) -> np.ndarray:
        """All edge ids owned by ``partid``."""
        return self.edges.part_ids(partid, self._etype_name(etype))

    def eid2localeid(
        self, eids: np.ndarray, partid: int, etype: str | tuple[str, str, str] | None = None
    ) -> np.ndarray:
        """Index of each owned edge within its part (per-type index with ``etype``)."""
        return self.edges.to_local(eids, partid, self._etype_name(etype))

    def map_to_per_etype(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous edge ids -> (edge type ids, per-type ids)."""
        return self.edges.to_per_type(eids)

    def map_to_homo_eid(self, ids: np.ndarray, etype: str | tuple[str, str, str]) -> np.ndarray:
        """Per-type edge ids -> homogeneous ids."""
        return self.edges.to_homo(ids, self._etype_name(etype))

    def num_edges(self, etype: str | tuple[str, str, str] | None = None) -> int:
        return self.edges.total(self._etype_name(etype))
