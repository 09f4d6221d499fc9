"""Range partition book: which part owns an id, and the homogeneous <-> per-type id mappings.

After relabeling, part ``p`` owns one contiguous range of homogeneous ids per type, and the
ranges are laid out part-major then type (DGL's scheme). Every lookup here is a vectorised
``searchsorted`` over those range boundaries.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from .format import PartConfig
from .graph import HOMO_ETYPE, HOMO_NTYPE, etype_key, parse_etype_key

DEFAULT_NTYPE = HOMO_NTYPE  # DGL's default arguments: homogeneous ids
_DEFAULT_ETYPES = (HOMO_ETYPE[1], HOMO_ETYPE, etype_key(HOMO_ETYPE))


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
        """Type id of ``name`` (None: the only type); a ValueError names the known types."""
        if name is None:
            if len(self.type_names) != 1:
                raise ValueError(f"a type is required; this graph has {self.type_names}")
            return 0
        try:
            return self.type_ids[name]
        except KeyError:
            raise ValueError(f"unknown type {name!r}; known: {', '.join(self.type_names)}") from None

    def total(self, name: str | None = None) -> int:
        """Number of ids (of type ``name``, or of every type)."""
        if name is None:
            return int(self.part_bounds[-1])
        return int(self.typed_start[-1, self.type_index(name)])

    def partid(self, ids: np.ndarray, name: str | None = None) -> np.ndarray:
        """Owner part of each id (homogeneous, or per-type ids of ``name``)."""
        ids = np.asarray(ids, dtype=np.int64)
        if name is None:
            return np.searchsorted(self.part_bounds[1:], ids, side="right")
        t = self.type_index(name)
        return np.searchsorted(self.typed_start[1:, t], ids, side="right")

    def part_ids(self, part: int, name: str | None = None) -> np.ndarray:
        """The ids part ``part`` owns (homogeneous, or per-type ids of ``name``)."""
        if name is None:
            return np.arange(self.part_bounds[part], self.part_bounds[part + 1], dtype=np.int64)
        t = self.type_index(name)
        return np.arange(self.typed_start[part, t], self.typed_start[part + 1, t], dtype=np.int64)

    def to_local(self, ids: np.ndarray, part: int, name: str | None = None) -> np.ndarray:
        """Index of each id among the ids of its type that ``part`` owns."""
        ids = np.asarray(ids, dtype=np.int64)
        if name is None:
            return ids - self.part_bounds[part]
        return ids - self.typed_start[part, self.type_index(name)]

    def to_per_type(self, homo_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous ids -> (type ids, per-type ids)."""
        homo_ids = np.asarray(homo_ids, dtype=np.int64)
        block = np.searchsorted(self._block_end, homo_ids, side="right")
        ntypes = len(self.type_names)
        part, tid = np.divmod(block, ntypes)
        per_type = homo_ids - self._block_start[block] + self.typed_start[part, tid]
        return tid, per_type

    def to_homo(self, per_type_ids: np.ndarray, name: str | None = None) -> np.ndarray:
        """Per-type ids of ``name`` -> homogeneous ids."""
        per_type_ids = np.asarray(per_type_ids, dtype=np.int64)
        t = self.type_index(name)
        part = np.searchsorted(self.typed_start[1:, t], per_type_ids, side="right")
        return per_type_ids - self.typed_start[part, t] + self.ranges[part, t, 0]


class RangePartitionBook:
    """DGL-style range partition book over nodes and edges, built from a part config.

    Homogeneous ids are the relabeled ids the partitioner wrote; per-type ids count each type
    separately (DGL's ``map_to_per_ntype`` / ``map_to_homo_nid``). As DGL's, every id lookup
    given a torch tensor returns int64 torch tensors (on the input's device); given numpy
    arrays or lists it returns numpy arrays (what servers use: they never load torch).
    ``partid2nids`` / ``partid2eids`` take no ids: they return tensors in a process that has
    loaded torch (a trainer), numpy arrays otherwise. ``ntype="_N"`` and ``etype="_E"`` (DGL's
    defaults) mean homogeneous ids on any graph, as in DGL.
    """

    def __init__(self, config: PartConfig | Mapping[str, Any], part_id: int = 0) -> None:
        config = PartConfig.of(config)  # a read config, or DGL's JSON as a dict
        self._ntypes = sorted(config.ntypes, key=config.ntypes.__getitem__)
        etype_keys = sorted(config.etypes, key=config.etypes.__getitem__)
        self._canonical_etypes = [parse_etype_key(k) for k in etype_keys]
        self._etypes = [c[1] for c in self._canonical_etypes]
        num_parts = config.num_parts
        if not 0 <= int(part_id) < num_parts:
            raise ValueError(f"part {part_id} does not exist (num_parts is {num_parts})")
        nranges = np.array([config.node_map[t] for t in self._ntypes], np.int64)  # (T, P, 2)
        eranges = np.array([config.edge_map[k] for k in etype_keys], np.int64)
        self.nodes = RangeMap(self._ntypes, nranges.transpose(1, 0, 2).reshape(num_parts, -1, 2))
        self.edges = RangeMap(etype_keys, eranges.transpose(1, 0, 2).reshape(num_parts, -1, 2))
        self._partid = int(part_id)
        self._num_parts = num_parts

    # --- DGL's descriptive API ---------------------------------------------------------------
    @property
    def partid(self) -> int:
        """The part (machine) this book was loaded for."""
        return self._partid

    @property
    def ntypes(self) -> list[str]:
        """Node type names, in node type id order."""
        return self._ntypes

    @property
    def etypes(self) -> list[str]:
        """Edge type names (the middle of each canonical type), in edge type id order."""
        return self._etypes

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        """Canonical edge types ``(src_type, etype, dst_type)``, in edge type id order."""
        return self._canonical_etypes

    def is_homogeneous(self) -> bool:
        """True when the graph has one node type and one edge type."""
        return len(self._ntypes) == 1 and len(self._etypes) == 1

    @property
    def local_ntype_offset(self) -> list[int]:
        """Where each node type starts among this part's owned nodes (DGL's name)."""
        counts = self.nodes.ranges[self._partid, :, 1] - self.nodes.ranges[self._partid, :, 0]
        return np.concatenate([[0], np.cumsum(counts)]).tolist()

    @property
    def local_etype_offset(self) -> list[int]:
        """Where each edge type starts among this part's owned edges (DGL's name)."""
        counts = self.edges.ranges[self._partid, :, 1] - self.edges.ranges[self._partid, :, 0]
        return np.concatenate([[0], np.cumsum(counts)]).tolist()

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

    def to_canonical_etype(self, etype: str | tuple[str, str, str]) -> tuple[str, str, str]:
        """The canonical type of ``etype`` (a name, ``"src:etype:dst"`` or a triple); a
        ValueError names the known types when it is unknown or ambiguous."""
        key = self._etype_name(etype)
        if key is None:
            raise ValueError("an edge type is required")
        return parse_etype_key(key)

    def _etype_name(self, etype: str | tuple[str, str, str] | None) -> str | None:
        """The ``"src:etype:dst"`` key of ``etype`` (None stays None: homogeneous ids)."""
        if etype is None:
            return None
        if isinstance(etype, tuple):
            key = etype_key(etype)
            if key not in self.edges.type_ids:
                raise ValueError(f"unknown edge type {etype}; known: {self._canonical_etypes}")
            return key
        if ":" in etype:
            return etype
        matches = [c for c in self._canonical_etypes if c[1] == etype]
        if len(matches) != 1:
            raise ValueError(
                f"edge type {etype!r} is {'ambiguous' if matches else 'unknown'}; use a canonical "
                f"type, one of {[etype_key(c) for c in self._canonical_etypes]}"
            )
        return etype_key(matches[0])

    def _ntype(self, ntype: str | None) -> str | None:
        # DGL's default "_N" means homogeneous ids on a graph that has no type of that name.
        return None if ntype == DEFAULT_NTYPE and ntype not in self.nodes.type_ids else ntype

    def _etype(self, etype: str | tuple[str, str, str] | None) -> str | None:
        if etype in _DEFAULT_ETYPES and etype_key(HOMO_ETYPE) not in self.edges.type_ids:
            return None
        return self._etype_name(etype)

    # --- nodes -----------------------------------------------------------------------------
    def nid2partid(self, nids: Ids, ntype: str | None = None) -> Ids:
        """Owner part of each node id (homogeneous ids, or per-type ids when ``ntype`` is given)."""
        arr, like = _ids_in(nids)
        return _ids_out(self.nodes.partid(arr, self._ntype(ntype)), like)

    def partid2nids(self, partid: int, ntype: str | None = None) -> Ids:
        """All node ids owned by ``partid`` (homogeneous, or per-type with ``ntype``)."""
        return _ids_out(self.nodes.part_ids(partid, self._ntype(ntype)), _LOADED)

    def nid2localnid(self, nids: Ids, partid: int, ntype: str | None = None) -> Ids:
        """Index of each owned node within its part (per-type index when ``ntype`` is given)."""
        arr, like = _ids_in(nids)
        return _ids_out(self.nodes.to_local(arr, partid, self._ntype(ntype)), like)

    def map_to_per_ntype(self, nids: Ids) -> tuple[Ids, Ids]:
        """Homogeneous node ids -> (node type ids, per-type ids)."""
        arr, like = _ids_in(nids)
        tids, per_type = self.nodes.to_per_type(arr)
        return _ids_out(tids, like), _ids_out(per_type, like)

    def map_to_homo_nid(self, ids: Ids, ntype: str) -> Ids:
        """Per-type node ids of ``ntype`` -> homogeneous ids."""
        arr, like = _ids_in(ids)
        return _ids_out(self.nodes.to_homo(arr, self._ntype(ntype)), like)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Number of nodes (of ``ntype``, or of every type)."""
        return self.nodes.total(self._ntype(ntype))

    _num_nodes = num_nodes  # DGL's (private) name, which user code calls

    # --- edges -----------------------------------------------------------------------------
    def eid2partid(self, eids: Ids, etype: str | tuple[str, str, str] | None = None) -> Ids:
        """Owner part of each edge id (homogeneous, or per-type with ``etype``)."""
        arr, like = _ids_in(eids)
        return _ids_out(self.edges.partid(arr, self._etype(etype)), like)

    def partid2eids(self, partid: int, etype: str | tuple[str, str, str] | None = None) -> Ids:
        """All edge ids owned by ``partid`` (homogeneous, or per-type with ``etype``)."""
        return _ids_out(self.edges.part_ids(partid, self._etype(etype)), _LOADED)

    def eid2localeid(
        self, eids: Ids, partid: int, etype: str | tuple[str, str, str] | None = None
    ) -> Ids:
        """Index of each owned edge within its part (per-type index with ``etype``)."""
        arr, like = _ids_in(eids)
        return _ids_out(self.edges.to_local(arr, partid, self._etype(etype)), like)

    def map_to_per_etype(self, eids: Ids) -> tuple[Ids, Ids]:
        """Homogeneous edge ids -> (edge type ids, per-type ids)."""
        arr, like = _ids_in(eids)
        tids, per_type = self.edges.to_per_type(arr)
        return _ids_out(tids, like), _ids_out(per_type, like)

    def map_to_homo_eid(self, ids: Ids, etype: str | tuple[str, str, str]) -> Ids:
        """Per-type edge ids -> homogeneous ids."""
        arr, like = _ids_in(ids)
        return _ids_out(self.edges.to_homo(arr, self._etype(etype)), like)

    def num_edges(self, etype: str | tuple[str, str, str] | None = None) -> int:
        """Number of edges (of ``etype``, or of every type)."""
        return self.edges.total(self._etype(etype))

    _num_edges = num_edges  # DGL's (private) name


# --- ids in and out: numpy inside, the caller's kind outside -----------------------------------
Ids = Any  # a numpy array, a list, or a torch tensor
_LOADED = object()  # "a tensor if this process has loaded torch"


def _ids_in(ids: Ids) -> tuple[np.ndarray, Any]:
    """``ids`` as an int64 numpy array, and the tensor it came from (None for numpy/lists).

    torch is looked up, never imported: a tensor exists only where torch is loaded.
    """
    if type(ids) is np.ndarray:  # the servers' and the runtime's case: no look-up
        return (ids if ids.dtype == np.int64 else ids.astype(np.int64)), None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(ids, torch.Tensor):
        return np.asarray(ids.detach().cpu().numpy(), dtype=np.int64), ids
    return np.asarray(ids, dtype=np.int64), None


def _ids_out(out: np.ndarray, like: Any) -> Ids:
    """``out`` as the caller's kind: an int64 tensor on ``like``'s device, else numpy."""
    if like is None:
        return out
    torch = sys.modules.get("torch")
    if torch is None:
        return out
    tensor = torch.from_numpy(np.ascontiguousarray(out, dtype=np.int64))
    if like is _LOADED or like.device.type == "cpu":
        return tensor
    return tensor.to(like.device)
