"""CLI tests for generate / partition / inspect: every input format and every bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dglctl.cli import cli, main
from partitioner.format import read_config
from partitioner.readers import write_chunked, write_npz
from testing.graphs import community_graph, hetero_graph

pytestmark = pytest.mark.unit


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run the CLI in-process through main() (the real error rendering), return code/out/err."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "command", [[], ["generate"], ["partition"], ["inspect"]], ids=lambda c: " ".join(c) or "root"
)
def test_help(command):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*command, "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_generate_partition_inspect_npz(tmp_path, capsys):
    npz = tmp_path / "g.npz"
    code, out, err = run(["generate", "--nodes", "2000", "--avg-degree", "8", "--out", str(npz)], capsys)
    assert code == 0, err
    code, out, err = run(["partition", "--input", str(npz), "--num-parts", "2",
                          "--out", str(tmp_path / "p"), "--balance-edges"], capsys)
    assert code == 0, err
    assert "edge cut" in out and "[5/5] write" in err
    cfg = read_config(tmp_path / "p" / "g.json")
    assert cfg["graph_name"] == "g" and cfg["num_parts"] == 2
    code, out, err = run(["inspect", str(tmp_path / "p"), "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["problems"] == [] and report["quality"]["parts"][0]["nodes"] > 0


def test_partition_text_with_node_data(tmp_path, capsys):
    g = community_graph(n=300)
    src, dst = g.edges[("_N", "_E", "_N")]
    edges = tmp_path / "edges.csv"
    lines = ["# an edge list", "src,dst"] + [f"{s},{d}" for s, d in zip(src.tolist(), dst.tolist(), strict=False)]
    edges.write_text("\n".join(lines) + "\n")
    np.save(tmp_path / "feat.npy", g.ndata["_N"]["feat"])
    np.save(tmp_path / "train.npy", g.ndata["_N"]["train_mask"])
    code, out, err = run(["partition", "--input", str(edges), "--node-data",
                          f"feat={tmp_path / 'feat.npy'}", "--node-data",
                          f"train_mask={tmp_path / 'train.npy'}", "--num-parts", "2",
                          "--graph-name", "txt", "--out", str(tmp_path / "p"), "--json"], capsys)
    assert code == 0, err
    cfg = json.loads(out)
    assert cfg["num_edges"] == len(src) and cfg["balance"] == ["nodes", "train"]
    assert "_N/feat" in cfg["feature_schema"]["node"]


def test_partition_chunked_hetero(tmp_path, capsys):
    write_chunked(hetero_graph(), tmp_path / "chunked", graph_name="mag")
    code, out, err = run(["partition", "--input", str(tmp_path / "chunked"), "--num-parts", "2",
                          "--halo-hops", "2", "--out", str(tmp_path / "p"), "--json"], capsys)
    assert code == 0, err
    cfg = json.loads(out)
    assert cfg["graph_name"] == "chunked"
    assert set(cfg["ntypes"]) == {"paper", "author"}
    assert len(cfg["etypes"]) == 3


def test_partition_out_edges_option(tmp_path, capsys):
    npz = tmp_path / "g.npz"
    write_npz(community_graph(n=300), npz)
    for flag, has in (([], True), (["--no-out-edges"], False), (["--out-edges"], True)):
        out = tmp_path / f"p{len(flag)}{has}"
        code, _, err = run(["partition", "--input", str(npz), "--num-parts", "2",
                            "--out", str(out), *flag], capsys)
        assert code == 0, err
        cfg = read_config(out)
        assert all(("csr" in cfg[f"part-{p}"]) == has for p in range(2)), flag
        assert any("_out_eids.npy" in f for f in cfg["files"]) == has
        code, _, err = run(["inspect", str(out)], capsys)  # out-CSR files carry checksums too
        assert code == 0, err


def test_generate_hetero_then_partition(tmp_path, capsys):
    out_dir = tmp_path / "h"
    code, _, err = run(["generate", "--hetero", "--nodes", "900", "--avg-degree", "6",
                        "--out", str(out_dir)], capsys)
    assert code == 0, err
    code, out, err = run(["partition", "--input", str(out_dir / "metadata.json"),
                          "--graph-name", "h", "--num-parts", "3", "--out", str(tmp_path / "p")],
                         capsys)
    assert code == 0, err
    assert read_config(tmp_path / "p")["num_parts"] == 3


def _assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert "error: " in err and err.count("error: ") == 1
    for n in needles:
        assert n in err, (n, err)


def test_bad_inputs(tmp_path, capsys):
    out = str(tmp_path / "p")
    # missing file
    code, _, err = run(["partition", "--input", str(tmp_path / "nope.npz"), "--num-parts", "2",
                        "--out", out], capsys)
    _assert_user_error(code, err, "nope.npz")
    # unreadable npz
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    code, _, err = run(["partition", "--input", str(bad), "--num-parts", "2", "--out", out], capsys)
    _assert_user_error(code, err, "bad.npz")
    # unparsable text line: file and line number
    txt = tmp_path / "e.txt"
    txt.write_text("0 1\n1 2\n2 x\n")
    code, _, err = run(["partition", "--input", str(txt), "--num-parts", "2", "--out", out], capsys)
    _assert_user_error(code, err, "e.txt", ":3")
    # negative id
    txt.write_text("0 1\n-1 2\n")
    code, _, err = run(["partition", "--input", str(txt), "--num-parts", "2", "--out", out], capsys)
    _assert_user_error(code, err, "e.txt", "-1")
    # out-of-range id in npz
    neg = tmp_path / "r.npz"
    np.savez(neg, src=np.array([0, 5]), dst=np.array([1, 2]), num_nodes=np.array(3))
    code, _, err = run(["partition", "--input", str(neg), "--num-parts", "2", "--out", out], capsys)
    _assert_user_error(code, err, "r.npz", "5")
    # feature rows not matching the node count
    g = community_graph(n=100)
    g.ndata["_N"]["feat"] = g.ndata["_N"]["feat"][:50]
    short = tmp_path / "short.npz"
    src, dst = g.edges[("_N", "_E", "_N")]
    np.savez(short, src=src, dst=dst, num_nodes=np.array(100), **{"node:feat": g.ndata["_N"]["feat"]})
    code, _, err = run(["partition", "--input", str(short), "--num-parts", "2", "--out", out], capsys)
    _assert_user_error(code, err, "short.npz", "feat", "50")
    # --num-parts out of range
    good = tmp_path / "good.npz"
    write_npz(community_graph(n=100), good)
    for parts, needle in (("0", "at least 1"), ("101", "exceeds the number of nodes")):
        code, _, err = run(["partition", "--input", str(good), "--num-parts", parts, "--out", out],
                           capsys)
        _assert_user_error(code, err, needle)
    # bad --node-data syntax
    code, _, err = run(["partition", "--input", str(txt), "--node-data", "feat", "--num-parts", "2",
                        "--out", out], capsys)
    _assert_user_error(code, err, "NAME=FILE.npy")
    assert not Path(out).exists(), "nothing half-written"


def test_unknown_type_in_chunked(tmp_path, capsys):
    folder = tmp_path / "c"
    write_chunked(hetero_graph(), folder, graph_name="x")
    meta = json.loads((folder / "metadata.json").read_text())
    meta["edge_type"][0] = "paper:cites:venue"
    (folder / "metadata.json").write_text(json.dumps(meta))
    code, _, err = run(["partition", "--input", str(folder), "--num-parts", "2",
                        "--out", str(tmp_path / "p")], capsys)
    _assert_user_error(code, err, "venue")


def test_existing_output_and_overwrite(tmp_path, capsys):
    good = tmp_path / "good.npz"
    write_npz(community_graph(n=100), good)
    args = ["partition", "--input", str(good), "--num-parts", "2", "--out", str(tmp_path / "p")]
    assert run(args, capsys)[0] == 0
    code, _, err = run(args, capsys)
    _assert_user_error(code, err, "already exists", "--overwrite")
    assert run([*args, "--overwrite"], capsys)[0] == 0


def test_inspect_detects_corruption(tmp_path, capsys):
    good = tmp_path / "good.npz"
    write_npz(community_graph(n=100), good)
    assert run(["partition", "--input", str(good), "--num-parts", "2", "--out",
                str(tmp_path / "p")], capsys)[0] == 0
    victim = tmp_path / "p" / "part1" / "node_feat" / "0_feat.npy"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    code, out, err = run(["inspect", str(tmp_path / "p")], capsys)
    assert code == 3 and "0_feat.npy" in err and "checksum" in err  # integrity: 3
    (tmp_path / "p" / "part0" / "halo_nids.npy").unlink()
    code, out, err = run(["inspect", str(tmp_path / "p")], capsys)
    assert "halo_nids.npy: missing" in err and "2 file(s)" in err


def test_debug_shows_traceback(tmp_path, capsys):
    code, _, err = run(["--debug", "partition", "--input", str(tmp_path / "x.npz"),
                        "--num-parts", "2", "--out", str(tmp_path / "p")], capsys)
    assert code == 2 and "Traceback" in err


def test_default_graph_name_leaves_out_the_compression_suffix(tmp_path):
    from dglctl.commands.data import _default_graph_name

    assert _default_graph_name(tmp_path / "edges.txt.gz") == "edges"
    assert _default_graph_name(tmp_path / "edges.csv.zst") == "edges"
    assert _default_graph_name(tmp_path / "edges.txt") == "edges"


def _without(parts: Path, tmp_path: Path, key: str) -> Path:
    """A copy of the partition of ``parts`` (its JSON) whose config lacks ``key``."""
    folder = tmp_path / f"no-{key}"
    shutil.copytree(parts.parent, folder)
    path = folder / parts.name
    cfg = json.loads(path.read_text())
    del cfg[key]
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("key", ["files", "feature_schema"])
def test_inspect_refuses_a_config_without_a_key_every_reader_needs(parts, tmp_path, capsys, key):
    """Without ``files`` there is nothing to verify ("0 checked, all match"), without
    ``feature_schema`` every trainer fails on its first feature: both are refused up front,
    naming the key and the file."""
    path = _without(parts[2], tmp_path, key)
    code, out, err = run(["inspect", str(path)], capsys)
    _assert_user_error(code, err, str(path), repr(key), "dglctl partition")
    assert "all match" not in out


def test_inspect_refuses_a_config_that_lists_no_file(parts, tmp_path, capsys):
    path = _without(parts[2], tmp_path, "files")
    path.write_text(json.dumps({**json.loads(path.read_text()), "files": {}}))
    code, out, err = run(["inspect", str(path)], capsys)
    _assert_user_error(code, err, str(path), "'files' is empty")
    assert "all match" not in out


@pytest.mark.parametrize("key", ["files", "feature_schema"])
def test_launch_dry_run_refuses_a_config_without_a_key_every_reader_needs(
        parts, home, local_cluster, tmp_path, capsys, key):
    path = _without(parts[2], tmp_path, key)
    trainer = str(Path(__file__).parent / "scripts" / "trainer.py")
    code, _, err = run(["launch", trainer, "--cluster", str(local_cluster), "--part-config",
                        str(path), "--dry-run", "--", "ok"], capsys)
    _assert_user_error(code, err, str(path), repr(key))
    assert not home.exists(), "nothing was written"
