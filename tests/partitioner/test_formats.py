"""The data people already have: OGB folders, gzip / zstd edge lists, scipy save_npz matrices,
Parquet edge lists and Parquet chunks, each written with the usual tools and read end to end
(through ``dglctl partition`` or the reader API), and each bad input named in its error."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from dglctl.cli import main
from partitioner.errors import PartitionInputError, PartitionOptionError
from partitioner.format import read_config
from partitioner.graph import HOMO_ETYPE, HOMO_NTYPE, Graph
from partitioner.loader import load_orig_ids, load_partition
from partitioner.readers import detect_format, read_chunked, read_graph, write_chunked, write_npz

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
sp = pytest.importorskip("scipy.sparse")
zstandard = pytest.importorskip("zstandard")

pytestmark = pytest.mark.unit

N, M = 240, 900


def _edges(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, N, M), rng.integers(0, N, M)
    src[:N], dst[:N] = np.arange(N), (np.arange(N) + 1) % N  # every node has an edge
    return src.astype(np.int64), dst.astype(np.int64)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """The CLI in-process through main() (the real error rendering): code, stdout, stderr."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def partition(tmp_path: Path, capsys, input_path: Path, *extra: str) -> dict:
    """``dglctl partition`` into 2 parts; returns the written config."""
    out = tmp_path / "parts"
    code, _, err = run(["partition", "--input", str(input_path), "--num-parts", "2",
                        "--graph-name", "g", "--out", str(out), "--overwrite", *extra], capsys)
    assert code == 0, err
    return read_config(out / "g.json")


def read_back(cfg: dict) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The partitioned graph in input ids: (src, dst) pairs in input edge order, node data and
    edge data rows in input id order."""
    orig_n, orig_e = load_orig_ids(cfg)
    nid, eid_of = orig_n[HOMO_NTYPE], orig_e[HOMO_ETYPE]
    pairs = np.zeros((cfg["num_edges"], 2), np.int64)
    ndata: dict[str, np.ndarray] = {}
    edata: dict[str, np.ndarray] = {}
    for p in range(cfg["num_parts"]):
        part = load_partition(cfg, p)
        lo, hi = part.owned_range
        for key, arr in part.node_feats().items():
            full = ndata.setdefault(key.split("/", 1)[1],
                                    np.zeros((cfg["num_nodes"], *arr.shape[1:]), arr.dtype))
            full[nid[lo:hi]] = arr
        s, d, eid, _ = part.inner_edges()
        order = np.argsort(eid)
        pairs[eid_of[eid[order]]] = np.stack([nid[s[order]], nid[d[order]]], 1)
        for key, arr in part.edge_feats().items():
            full = edata.setdefault(key.split("/", 1)[1],
                                    np.zeros((cfg["num_edges"], *arr.shape[1:]), arr.dtype))
            full[eid_of[eid[order]]] = arr
    return pairs, ndata, edata


def assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


# ----------------------------------------------------------------------------- OGB


def _csv_gz(path: Path, values: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(values).to_csv(path, header=False, index=False, compression="gzip")


def write_ogb(root: Path, splits: tuple[str, ...] = ("time",)) -> dict[str, np.ndarray]:
    """An ogbn-arxiv-shaped folder written as OGB does; returns what it holds."""
    rng = np.random.default_rng(1)
    src, dst = _edges()
    data = {"src": src, "dst": dst,
            "feat": rng.standard_normal((N, 6)).astype(np.float32),
            "label": rng.integers(0, 5, N), "year": rng.integers(2000, 2020, N),
            "edge_feat": rng.random((M, 2)).astype(np.float32)}
    raw = root / "raw"
    _csv_gz(raw / "edge.csv.gz", np.stack([src, dst], 1))
    _csv_gz(raw / "node-feat.csv.gz", data["feat"])
    _csv_gz(raw / "node-label.csv.gz", data["label"])
    _csv_gz(raw / "node_year.csv.gz", data["year"])
    _csv_gz(raw / "edge-feat.csv.gz", data["edge_feat"])
    _csv_gz(raw / "num-node-list.csv.gz", np.array([N]))
    _csv_gz(raw / "num-edge-list.csv.gz", np.array([M]))
    perm = rng.permutation(N)
    for i, split in enumerate(splits):
        parts = np.split(np.roll(perm, i), [150, 200])
        for stem, ids in zip(("train", "valid", "test"), parts, strict=True):
            _csv_gz(root / "split" / split / f"{stem}.csv.gz", ids)
            data[f"{split}/{stem}"] = ids
    return data


def test_ogb_folder_partitions_end_to_end(tmp_path, capsys):
    root = tmp_path / "ogbn_tiny"
    data = write_ogb(root)
    assert detect_format(root) == "ogb" and detect_format(root / "raw") == "ogb"
    cfg = partition(tmp_path, capsys, root)  # --format auto
    assert cfg["num_nodes"] == N and cfg["num_edges"] == M
    pairs, ndata, edata = read_back(cfg)
    np.testing.assert_array_equal(pairs, np.stack([data["src"], data["dst"]], 1))
    np.testing.assert_array_equal(ndata["feat"], data["feat"])
    assert ndata["feat"].dtype == np.float32 and ndata["label"].dtype == np.int64
    np.testing.assert_array_equal(ndata["label"], data["label"])
    np.testing.assert_array_equal(ndata["year"], data["year"])
    np.testing.assert_array_equal(edata["feat"], data["edge_feat"])
    for stem, mask in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask")):
        expected = np.zeros(N, bool)
        expected[data[f"time/{stem}"]] = True
        assert ndata[mask].dtype == bool
        np.testing.assert_array_equal(ndata[mask], expected)
    assert "train" in cfg["balance"]  # train_mask drives the balance constraint, as elsewhere
    assert partition(tmp_path, capsys, root / "raw", "--format", "ogb")["num_nodes"] == N


def test_ogb_split_choice(tmp_path, capsys):
    root = tmp_path / "ogb"
    data = write_ogb(root, splits=("species", "time"))
    with pytest.raises(PartitionOptionError, match="2 splits: species, time.*--split NAME"):
        read_graph(root)
    with pytest.raises(PartitionOptionError, match="no split 'nope'; its splits: species, time"):
        read_graph(root, split="nope")
    cfg = partition(tmp_path, capsys, root, "--split", "species")
    expected = np.zeros(N, bool)
    expected[data["species/valid"]] = True
    np.testing.assert_array_equal(read_back(cfg)[1]["val_mask"], expected)
    code, _, err = run(["partition", "--input", str(root), "--num-parts", "2",
                        "--out", str(tmp_path / "p2")], capsys)
    assert_user_error(code, err, "species, time", "--split")
    with pytest.raises(PartitionOptionError, match="split only applies to ogb input"):
        read_graph(tmp_path / "parts" / "g.json", split="time")


def test_ogb_bad_inputs_name_the_file(tmp_path, capsys):
    root = tmp_path / "ogb"
    write_ogb(root)
    raw = root / "raw"
    _csv_gz(raw / "node-feat.csv.gz", np.zeros((N - 3, 6), np.float32))
    with pytest.raises(PartitionInputError, match=r"node-feat\.csv\.gz: node feat has 237 rows "
                                                  r"but the graph has 240 nodes"):
        read_graph(root)
    write_ogb(root)
    _csv_gz(root / "split" / "time" / "train.csv.gz", np.array([0, 5, N + 7]))
    with pytest.raises(PartitionInputError, match=r"train\.csv\.gz:3: node id 247 on line 3 is "
                                                  "out of range"):
        read_graph(root)
    write_ogb(root)
    _csv_gz(raw / "edge.csv.gz", np.array([[0, 1], [2, N]]))
    code, _, err = run(["partition", "--input", str(root), "--num-parts", "2",
                        "--out", str(tmp_path / "p")], capsys)
    assert_user_error(code, err, "edge.csv.gz:2", f"destination id {N} is out of range")
    with gzip.open(raw / "edge.csv.gz", "wt") as fh:
        fh.write("0,1\n1,x\n")
    with pytest.raises(PartitionInputError, match=r"edge\.csv\.gz:2: .*'x' is not an integer"):
        read_graph(root)
    write_ogb(root)
    _csv_gz(raw / "num-node-list.csv.gz", np.array([100, 140]))
    with pytest.raises(PartitionInputError, match="num-node-list.csv.gz: lists 2 graphs"):
        read_graph(root)
    write_ogb(root)
    (raw / "node-label.csv.gz").write_bytes(os.urandom(300))
    with pytest.raises(PartitionInputError, match="node-label.csv.gz: not an OGB node label "
                                                  "CSV file: looks binary/compressed"):
        read_graph(root)
    (raw / "relations").mkdir()
    with pytest.raises(PartitionInputError, match="heterogeneous OGB dataset"):
        read_graph(root)
    with pytest.raises(PartitionInputError, match="not an OGB dataset folder"):
        read_graph(tmp_path, fmt="ogb")


# ----------------------------------------------------------------------------- compressed text


@pytest.mark.parametrize("name", ["edges.txt.gz", "edges.csv.zst", "edges.tsv"])
def test_compressed_text_edge_lists(tmp_path, capsys, name):
    src, dst = _edges()
    delim = "\t" if "tsv" in name else ","
    text = f"src{delim}dst{delim}weight\n" + "".join(
        f"{s}{delim}{d}{delim}{s * 0.5}\n" for s, d in zip(src.tolist(), dst.tolist(), strict=True))
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    elif name.endswith(".zst"):
        path.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    else:  # gzip bytes under a plain name: the magic bytes decide, not the suffix
        path.write_bytes(gzip.compress(text.encode()))
    assert detect_format(path) == "text"
    cfg = partition(tmp_path, capsys, path)
    pairs, _, edata = read_back(cfg)
    assert cfg["num_nodes"] == N and cfg["num_edges"] == M
    np.testing.assert_array_equal(pairs, np.stack([src, dst], 1))
    np.testing.assert_array_equal(edata["weight"], src * 0.5)


def test_binary_or_corrupt_text_is_a_clear_error(tmp_path, capsys):
    junk = tmp_path / "edges.txt"
    junk.write_bytes(b"0 1\n" + bytes(range(256)) * 4)
    code, _, err = run(["partition", "--input", str(junk), "--num-parts", "2",
                        "--out", str(tmp_path / "p")], capsys)
    assert_user_error(code, err, f"{junk}: not a text edge list: looks binary/compressed",
                      "NUL byte")
    assert "line 2" not in err and "\\x" not in err  # never garbage quoted as a line
    npz = tmp_path / "g.npz"
    write_npz(Graph.homogeneous(*_edges(), N), npz)
    with pytest.raises(PartitionInputError, match=r"g\.npz: not a text edge list: looks "
                                                  r"binary/compressed: a zip archive .*--format npz"):
        read_graph(npz, fmt="text")
    zipped = tmp_path / "e.txt.zst"
    zipped.write_bytes(zstandard.ZstdCompressor().compress(npz.read_bytes()))
    with pytest.raises(PartitionInputError, match="after zstd decompression: a zip archive"):
        read_graph(zipped)
    truncated = tmp_path / "e.txt.gz"
    truncated.write_bytes(gzip.compress(b"0 1\n" * 5000)[:-30])
    with pytest.raises(PartitionInputError, match=r"e\.txt\.gz: gzip data is corrupt or "
                                                  "truncated"):
        read_graph(truncated)


# ----------------------------------------------------------------------------- scipy save_npz


@pytest.mark.parametrize("layout", ["csr", "coo", "csc"])
def test_scipy_save_npz(tmp_path, capsys, layout):
    src, dst = _edges()
    weights = np.arange(M, dtype=np.float32) + 1
    matrix = sp.coo_matrix((weights, (src, dst)), shape=(N, N)).asformat(layout)
    path = tmp_path / "adj.npz"
    sp.save_npz(path, matrix)
    assert detect_format(path) == "scipy"
    feat = np.random.default_rng(2).standard_normal((N, 3)).astype(np.float32)
    np.save(tmp_path / "feat.npy", feat)
    cfg = partition(tmp_path, capsys, path, "--node-data", f"feat={tmp_path / 'feat.npy'}")
    pairs, ndata, edata = read_back(cfg)
    coo = matrix.tocoo()
    assert cfg["num_nodes"] == N and cfg["num_edges"] == matrix.nnz
    np.testing.assert_array_equal(pairs, np.stack([coo.row, coo.col], 1))
    np.testing.assert_array_equal(edata["weight"], coo.data)
    np.testing.assert_array_equal(ndata["feat"], feat)
    sp.save_npz(path, sp.coo_matrix((np.ones(M), (src, dst)), shape=(N, N)))  # keeps duplicates
    assert "weight" not in read_graph(path).edata[HOMO_ETYPE]  # a 0/1 adjacency: no weights


def test_scipy_npz_errors_and_dglctl_npz_kept_apart(tmp_path):
    path = tmp_path / "rect.npz"
    sp.save_npz(path, sp.random(5, 7, density=0.3, format="csr", random_state=0))
    with pytest.raises(PartitionInputError, match=r"rect\.npz: a 5 x 7 matrix is not a graph's "
                                                  "adjacency"):
        read_graph(path)
    ours = tmp_path / "ours.npz"
    write_npz(Graph.homogeneous(*_edges(), N), ours)
    assert detect_format(ours) == "npz" and read_graph(ours).total_edges == M
    with pytest.raises(PartitionInputError, match=r"ours\.npz: not a scipy.sparse.save_npz "
                                                  "matrix") as info:
        read_graph(ours, fmt="scipy")
    assert "--format npz" in info.value.hint
    with pytest.raises(PartitionInputError, match=r"rect\.npz: is a scipy.sparse.save_npz "
                                                  "matrix") as info:
        read_graph(path, fmt="npz")
    assert "--format scipy" in info.value.hint
    with pytest.raises(PartitionOptionError, match="num_nodes only applies to parquet and text"):
        read_graph(path, num_nodes=10)


# ----------------------------------------------------------------------------- parquet


def test_parquet_edge_list(tmp_path, capsys):
    src, dst = _edges()
    path = tmp_path / "edges.parquet"
    pq.write_table(pa.table({"dst": dst, "note": ["x"] * M, "src": src,
                             "weight": src * 0.25}), path)
    assert detect_format(path) == "parquet"
    cfg = partition(tmp_path, capsys, path, "--num-nodes", str(N + 10))
    pairs, _, edata = read_back(cfg)
    assert cfg["num_nodes"] == N + 10 and cfg["num_edges"] == M
    np.testing.assert_array_equal(pairs, np.stack([src, dst], 1))
    np.testing.assert_array_equal(edata["weight"], src * 0.25)
    # No src/dst names: the first two integer columns, as pandas writes them.
    pd.DataFrame({"name": ["e"] * M, "a": src.astype(np.int32), "b": dst}).to_parquet(path)
    graph = read_graph(path)
    np.testing.assert_array_equal(graph.edges[HOMO_ETYPE][0], src)
    np.testing.assert_array_equal(graph.edges[HOMO_ETYPE][1], dst)
    assert graph.num_nodes[HOMO_NTYPE] == N


def test_parquet_bad_inputs(tmp_path, capsys, monkeypatch):
    path = tmp_path / "edges.parquet"
    pq.write_table(pa.table({"src": pa.array([0, 1, None, 3]), "dst": [1, 2, 3, 0]}), path)
    with pytest.raises(PartitionInputError, match=r"edges\.parquet: column 'src' is null at "
                                                  r"row 2 \(0-based\)"):
        read_graph(path)
    pq.write_table(pa.table({"src": [0.0, 1.5], "dst": [1, 0]}), path)
    with pytest.raises(PartitionInputError, match="column 'src' must hold integer node ids"):
        read_graph(path)
    pq.write_table(pa.table({"src": [0, 1, 2], "dst": [1, 9, 0]}), path)
    code, _, err = run(["partition", "--input", str(path), "--num-nodes", "5",
                        "--num-parts", "2", "--out", str(tmp_path / "p")], capsys)
    assert_user_error(code, err, "edges.parquet", "column 'dst': node id 9 at row 1")
    pq.write_table(pa.table({"x": ["a"], "y": [1.0]}), path)
    with pytest.raises(PartitionInputError, match="has no edge columns.*x \\(string\\)"):
        read_graph(path)
    path.write_text("0 1\n1 2\n")
    with pytest.raises(PartitionInputError, match=r"edges\.parquet: not a readable Parquet"):
        read_graph(path)
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    code, _, err = run(["partition", "--input", str(path), "--num-parts", "2",
                        "--out", str(tmp_path / "p")], capsys)
    assert_user_error(code, err, "edges.parquet: reading Parquet needs pyarrow",
                      "pip install 'dglctl[parquet]'")


def test_chunked_format_with_parquet_and_compressed_chunks(tmp_path):
    """DGL's chunked format with ``"format": {"name": "parquet"}`` edge and feature chunks (as
    DGL's writer makes them: columns "0", "1", ..., a ``shape`` in the schema metadata) and a
    gzip-compressed csv edge chunk."""
    src, dst = _edges()
    rng = np.random.default_rng(3)
    graph = Graph.homogeneous(src, dst, N, ndata={"feat": rng.random((N, 4)).astype(np.float32),
                                                  "label": rng.integers(0, 3, N)},
                              edata={"w": rng.random(M)})
    folder = tmp_path / "chunked"
    meta_path = write_chunked(graph, folder, "g", num_chunks=2)
    meta = json.loads(meta_path.read_text())
    key = "_N:_E:_N"
    csv_files = meta["edges"][key]["data"]
    gz = csv_files[0] + ".gz"
    (folder / gz).write_bytes(gzip.compress((folder / csv_files[0]).read_bytes()))
    meta["edges"][key]["data"] = [gz, csv_files[1]]  # a compressed csv chunk reads as it is
    for name, spec in meta["node_data"]["_N"].items():
        parquet_files = []
        for i, rel in enumerate(spec["data"]):
            arr = np.load(folder / rel)
            two_d = arr.reshape(len(arr), -1)
            table = pa.table({str(c): two_d[:, c] for c in range(two_d.shape[1])})
            pq.write_table(table.replace_schema_metadata({"shape": str(arr.shape)}),
                           folder / f"{name}.{i}.parquet")
            parquet_files.append(f"{name}.{i}.parquet")
        meta["node_data"]["_N"][name] = {"format": {"name": "parquet"}, "data": parquet_files}
    meta_path.write_text(json.dumps(meta))
    back = read_chunked(folder)
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][0], src)
    for name in ("feat", "label"):
        np.testing.assert_array_equal(back.ndata[HOMO_NTYPE][name], graph.ndata[HOMO_NTYPE][name])
    assert back.ndata[HOMO_NTYPE]["label"].shape == (N,)  # the shape metadata, as DGL writes it
    # Parquet edge chunks, as DGL's writer makes them (columns "0" and "1").
    for i, rel in enumerate(csv_files):
        pairs = np.loadtxt(folder / rel, dtype=np.int64, ndmin=2)
        pd.DataFrame(pairs, columns=["0", "1"]).to_parquet(folder / f"edges{i}.parquet")
    meta["edges"][key] = {"format": {"name": "parquet"},
                          "data": ["edges0.parquet", "edges1.parquet"]}
    meta_path.write_text(json.dumps(meta))
    back = read_chunked(folder)
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][0], src)
    np.testing.assert_array_equal(back.edges[HOMO_ETYPE][1], dst)
    np.testing.assert_array_equal(back.edata[HOMO_ETYPE]["w"], graph.edata[HOMO_ETYPE]["w"])
    pd.DataFrame({"0": [0, N + 1], "1": [1, 2]}).to_parquet(folder / "edges0.parquet")
    with pytest.raises(PartitionInputError, match=r"edges0\.parquet: edge chunk of '_N:_E:_N' "
                                                  "has 2 edges"):
        read_chunked(folder)
    meta["edges"][key]["format"] = {"name": "hdf5"}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(PartitionInputError, match="only 'csv' or 'parquet' is supported"):
        read_chunked(folder)
