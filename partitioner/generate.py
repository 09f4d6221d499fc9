"""Synthetic community graphs with learnable node features, for tests, demos and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import PartitionOptionError
from .graph import Graph

# Degree weights follow a Pareto (power-law) tail with this exponent; above 2 the variance
# stays finite, so hubs exist without a few nodes swallowing most edges.
_PARETO_ALPHA = 2.5
# Integer weights feed a repeat table; multiplying the Pareto draw keeps the tail visible after
# rounding to integers while the table stays a few entries per node.
_WEIGHT_SCALE = 4.0
# No node may expect more than this fraction of its community as neighbours, otherwise hubs in
# small communities would draw the same neighbours again and again (duplicate edges).
_MAX_DEGREE_FRACTION_OF_COMMUNITY = 0.25
# Self loops are redrawn a few times; whatever is left afterwards (tiny communities) is dropped.
_SELF_LOOP_RETRIES = 8
# Duplicate edges are removed and replaced by fresh draws this many times at most; a graph too
# dense for its communities simply ends up with fewer edges.
_TOP_UP_ROUNDS = 3
# Distance between class centroids relative to per-dimension noise: chosen so that a
# nearest-centroid classifier on features alone lands around 50-60% with 8 classes, leaving
# room for neighbour aggregation to help.
_CENTROID_NORM = 1.0
_FEATURE_NOISE = 0.7

HETERO_PAPER = "paper"
HETERO_AUTHOR = "author"
HETERO_ETYPES = (
    (HETERO_AUTHOR, "writes", HETERO_PAPER),
    (HETERO_PAPER, "written-by", HETERO_AUTHOR),
    (HETERO_PAPER, "cites", HETERO_PAPER),
)


@dataclass
class _TypeSampler:
    """Weighted endpoint sampling for one node type, grouped by community.

    ``table`` lists node ids, each repeated by its integer weight, grouped by community, so a
    uniform index into a community's slice of the table is a weight-proportional draw.
    """

    community: np.ndarray  # community id of every node of this type
    table: np.ndarray
    start: np.ndarray  # per community: first table index (whole table if the community is empty)
    length: np.ndarray  # per community: number of table entries

    def draw_any(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Draw ``count`` nodes with probability proportional to their weight."""
        return self.table[rng.integers(0, len(self.table), count)]

    def draw_in(self, rng: np.random.Generator, communities: np.ndarray) -> np.ndarray:
        """Draw one node per entry of ``communities``, weight-proportional within it."""
        offset = (rng.random(len(communities)) * self.length[communities]).astype(np.int64)
        return self.table[self.start[communities] + offset]


def _make_sampler(
    rng: np.random.Generator, num_nodes: int, num_communities: int, avg_degree: float
) -> _TypeSampler:
    """Assign nodes to communities at random and build their weighted sampling table."""
    # A random permutation modulo C gives equal community sizes while scattering members over
    # the id space, so a partitioner cannot find the communities from the ids alone.
    community = np.empty(num_nodes, dtype=np.int64)
    community[rng.permutation(num_nodes)] = np.arange(num_nodes, dtype=np.int64) % num_communities
    raw = 1.0 + _WEIGHT_SCALE * rng.pareto(_PARETO_ALPHA, num_nodes)
    community_size = max(1, num_nodes // num_communities)
    mean_raw = 1.0 + _WEIGHT_SCALE / (_PARETO_ALPHA - 1.0)
    if avg_degree > 0:
        cap = max(1.0, _MAX_DEGREE_FRACTION_OF_COMMUNITY * community_size * mean_raw / avg_degree)
        raw = np.minimum(raw, cap)
    weight = np.maximum(1, np.rint(raw)).astype(np.int64)

    order = np.argsort(community, kind="stable")
    table = np.repeat(order, weight[order])
    length = np.bincount(community, weights=weight, minlength=num_communities).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    # An empty community (more communities than nodes of this type) falls back to the whole
    # table so every draw still lands on a real node.
    empty = length == 0
    start[empty] = 0
    length[empty] = len(table)
    return _TypeSampler(community=community, table=table, start=start, length=length)


def _draw_edges(
    rng: np.random.Generator,
    src_side: _TypeSampler,
    dst_side: _TypeSampler,
    count: int,
    num_communities: int,
    p_intra: float,
    same_type: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``count`` edges (fewer once self loops are dropped), ``p_intra`` of them intra."""
    src = src_side.draw_any(rng, count)
    target = src_side.community[src]
    if num_communities > 1:
        leave = rng.random(count) >= p_intra
        # Shifting by 1..C-1 picks a different community uniformly, so the intra share is
        # exactly p_intra in expectation instead of p_intra + (1 - p_intra) / C.
        shift = rng.integers(1, num_communities, int(leave.sum()))
        target[leave] = (target[leave] + shift) % num_communities
    dst = dst_side.draw_in(rng, target)
    if same_type:
        for _ in range(_SELF_LOOP_RETRIES):
            loops = np.flatnonzero(src == dst)
            if loops.size == 0:
                break
            dst[loops] = dst_side.draw_in(rng, target[loops])
        keep = src != dst
        if not keep.all():
            src, dst = src[keep], dst[keep]
    return src, dst


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sort and drop repeats (np.unique hashes first in numpy 2.x, which is far slower here)."""
    keys = np.sort(keys)
    if len(keys) > 1:
        keep = np.empty(len(keys), dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _sample_edges(
    rng: np.random.Generator,
    src_side: _TypeSampler,
    dst_side: _TypeSampler,
    count: int,
    num_communities: int,
    p_intra: float,
    same_type: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw up to ``count`` distinct edges, sorted by source.

    For one node type the edges are undirected (``src < dst``, the caller adds the reverse),
    so ``(a, b)`` and ``(b, a)`` count as the same edge.
    """
    empty = np.zeros(0, dtype=np.int64)
    n_src, n_dst = len(src_side.community), len(dst_side.community)
    if count == 0 or n_src == 0 or n_dst == 0:
        return empty, empty.copy()
    keys = empty
    for attempt in range(_TOP_UP_ROUNDS):
        need = count - len(keys)
        if need <= 0:
            break
        # Later rounds overshoot a little because some of the new edges are duplicates too.
        draw = need if attempt == 0 else int(need * 1.25) + 16
        src, dst = _draw_edges(rng, src_side, dst_side, draw, num_communities, p_intra, same_type)
        if same_type:
            src, dst = np.minimum(src, dst), np.maximum(src, dst)
        # One int64 key per edge: sorting it both removes duplicates and orders by source.
        fresh = _sorted_unique(src * n_dst + dst)
        if len(keys):
            pos = np.searchsorted(keys, fresh)
            known = keys[np.minimum(pos, len(keys) - 1)] == fresh
            # np.insert merges the few new keys in one pass; re-sorting everything would cost
            # a full sort per round.
            keys = np.insert(keys, pos[~known], fresh[~known])
        else:
            keys = fresh
    if len(keys) > count:
        keys = np.delete(keys, rng.choice(len(keys), len(keys) - count, replace=False))
    return keys // n_dst, keys % n_dst


def _features(rng: np.random.Generator, label: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Class centroid plus Gaussian noise, float32, one row per node."""
    feat = rng.standard_normal((len(label), centroids.shape[1]), dtype=np.float32)
    feat *= np.float32(_FEATURE_NOISE)
    feat += centroids[label]
    return feat


def _masks(
    rng: np.random.Generator, num_nodes: int, train_frac: float, val_frac: float
) -> dict[str, np.ndarray]:
    """Disjoint random train/val/test masks; test takes whatever train and val leave."""
    perm = rng.permutation(num_nodes)
    n_train = int(round(train_frac * num_nodes))
    n_val = min(int(round(val_frac * num_nodes)), num_nodes - n_train)
    masks = {}
    for name, ids in (
        ("train_mask", perm[:n_train]),
        ("val_mask", perm[n_train : n_train + n_val]),
        ("test_mask", perm[n_train + n_val :]),
    ):
        mask = np.zeros(num_nodes, dtype=bool)
        mask[ids] = True
        masks[name] = mask
    return masks


def _check_args(
    num_nodes: int,
    avg_degree: float,
    num_communities: int | None,
    num_classes: int,
    feat_dim: int,
    p_intra: float,
    train_frac: float,
    val_frac: float,
    hetero: bool,
) -> None:
    """Raise PartitionOptionError on any argument outside its range."""
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < 1:
        raise PartitionOptionError(f"num_nodes must be an integer >= 1 (got {num_nodes!r})")
    if hetero and num_nodes < 2:
        raise PartitionOptionError(
            "a heterogeneous graph needs num_nodes >= 2 (one paper and one author; "
            f"got {num_nodes})"
        )
    if not np.isfinite(avg_degree) or avg_degree < 0:
        raise PartitionOptionError(f"avg_degree must be a finite number >= 0 (got {avg_degree!r})")
    if num_communities is not None and not 1 <= num_communities <= num_nodes:
        raise PartitionOptionError(
            f"num_communities must be between 1 and num_nodes={num_nodes} (got {num_communities})"
        )
    if num_classes < 1:
        raise PartitionOptionError(f"num_classes must be >= 1 (got {num_classes})")
    if feat_dim < 1:
        raise PartitionOptionError(f"feat_dim must be >= 1 (got {feat_dim})")
    for name, value in (("p_intra", p_intra), ("train_frac", train_frac), ("val_frac", val_frac)):
        if not 0.0 <= value <= 1.0:
            raise PartitionOptionError(f"{name} must be in [0, 1] (got {value!r})")
    if train_frac + val_frac > 1.0 + 1e-9:
        raise PartitionOptionError(
            f"train_frac + val_frac must be <= 1 (got {train_frac} + {val_frac})",
            hint="the test set gets whatever train and validation leave",
        )


def default_num_communities(num_nodes: int, num_classes: int = 8) -> int:
    """About one community per thousand nodes, but at least one per class (and per node)."""
    return max(1, min(num_nodes, max(2, num_classes, num_nodes // 1000)))


def generate_graph(
    num_nodes: int,
    avg_degree: float = 20.0,
    num_communities: int | None = None,
    num_classes: int = 8,
    feat_dim: int = 32,
    p_intra: float = 0.9,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
    seed: int = 0,
    hetero: bool = False,
) -> Graph:
    """Generate a planted-community graph a GNN can learn from.

    Homogeneous (default): ``num_nodes`` nodes of type ``_N`` split into equal random
    communities; about ``num_nodes * avg_degree / 2`` undirected edges drawn with power-law
    endpoint weights, a ``p_intra`` share inside one community, each stored in both directions
    (so ``total_edges`` is about ``num_nodes * avg_degree``) and without self loops. Node data:
    ``feat`` (float32, class centroid + noise), ``label`` (int64, community modulo
    ``num_classes``) and disjoint boolean ``train_mask`` / ``val_mask`` / ``test_mask``.

    ``hetero=True``: ``num_nodes`` is split two thirds ``paper`` (feat, label, masks) and one
    third ``author`` (feat) sharing the communities; half the undirected edges are
    ``paper:cites:paper`` (both directions), half ``author:writes:paper`` with their reverses in
    ``paper:written-by:author``.

    Edges come out ordered by (smaller endpoint, larger endpoint), with all reverse edges after
    all forward ones. The same arguments and ``seed`` always give the same graph. Raises PartitionOptionError for
    arguments out of range.
    """
    _check_args(
        num_nodes,
        avg_degree,
        num_communities,
        num_classes,
        feat_dim,
        p_intra,
        train_frac,
        val_frac,
        hetero,
    )
    num_nodes = int(num_nodes)
    rng = np.random.default_rng(seed)
    if num_communities is None:
        num_comm = default_num_communities(num_nodes, num_classes)
    else:
        num_comm = int(num_communities)
    centroids = rng.standard_normal((num_classes, feat_dim)).astype(np.float32)
    norms = np.linalg.norm(centroids, axis=1, keepdims=True)
    # A fixed centroid norm makes the margin between two classes, and so the accuracy from
    # features alone, independent of feat_dim (noise along the centroid difference is 1-D).
    centroids *= np.float32(_CENTROID_NORM) / np.maximum(norms, np.float32(1e-12))
    num_undirected = int(round(num_nodes * avg_degree / 2.0))

    if not hetero:
        side = _make_sampler(rng, num_nodes, num_comm, avg_degree)
        src, dst = _sample_edges(rng, side, side, num_undirected, num_comm, p_intra, True)
        label = side.community % num_classes
        ndata = {"feat": _features(rng, label, centroids), "label": label}
        ndata.update(_masks(rng, num_nodes, train_frac, val_frac))
        return Graph.homogeneous(
            np.concatenate([src, dst]), np.concatenate([dst, src]), num_nodes, ndata=ndata
        )

    num_papers = max(1, min(num_nodes - 1, int(round(num_nodes * 2 / 3))))
    num_authors = num_nodes - num_papers
    paper_comm = min(num_comm, num_papers)
    papers = _make_sampler(rng, num_papers, paper_comm, avg_degree)
    # Authors share the paper communities so writes edges also stay mostly inside one.
    authors = _make_sampler(rng, num_authors, paper_comm, avg_degree)
    num_cites = num_undirected // 2
    c_src, c_dst = _sample_edges(rng, papers, papers, num_cites, paper_comm, p_intra, True)
    w_src, w_dst = _sample_edges(
        rng, authors, papers, num_undirected - num_cites, paper_comm, p_intra, False
    )
    paper_label = papers.community % num_classes
    paper_data = {"feat": _features(rng, paper_label, centroids), "label": paper_label}
    paper_data.update(_masks(rng, num_papers, train_frac, val_frac))
    author_data = {"feat": _features(rng, authors.community % num_classes, centroids)}
    writes, written_by, cites = HETERO_ETYPES
    return Graph(
        num_nodes={HETERO_PAPER: num_papers, HETERO_AUTHOR: num_authors},
        edges={
            writes: (w_src, w_dst),
            written_by: (w_dst.copy(), w_src.copy()),
            cites: (np.concatenate([c_src, c_dst]), np.concatenate([c_dst, c_src])),
        },
        ndata={HETERO_PAPER: paper_data, HETERO_AUTHOR: author_data},
        edata={etype: {} for etype in HETERO_ETYPES},
    )
