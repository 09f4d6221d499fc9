"""``dglctl partition --estimate``, ``--memory-limit`` and ``--regime`` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from partitioner.format import read_config
from partitioner.readers import write_npz
from testing.graphs import community_graph
from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess

REPO = Path(__file__).resolve().parents[2]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dglctl", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=6 * TIMEOUT)


def test_cli_estimate_prints_the_plan_and_writes_nothing(tmp_path):
    write_npz(community_graph(n=600), tmp_path / "g.npz")
    out = tmp_path / "parts"
    text = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                "--out", str(out), "--estimate")
    assert text.returncode == 0, text.stderr
    assert "fast" in text.stdout and "lean" in text.stdout and "memory plan:" in text.stdout
    assert "method auto: likely metis" in text.stdout
    assert not out.exists()
    js = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
              "--out", str(out), "--estimate", "--json", "--memory-limit", "64G")
    assert js.returncode == 0, js.stderr
    plan = json.loads(js.stdout)
    assert plan["regime"] == "fast" and plan["memory_limit"] == 64 << 30
    assert set(plan["phases"]) == {"read", "symmetrize", "assign", "relabel", "write"}
    assert plan["edges"] > 0 and plan["disk_bytes"] > 0 and not out.exists()


def test_cli_memory_limit_too_small_or_malformed_is_a_clear_error(tmp_path):
    write_npz(community_graph(n=600), tmp_path / "g.npz")
    out = tmp_path / "parts"
    small = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                 "--out", str(out), "--memory-limit", "1M")
    assert small.returncode != 0
    assert "even in the lean regime" in small.stderr and "1.0 MiB" in small.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["g.npz"]
    bad = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
               "--out", str(out), "--memory-limit", "lots")
    assert bad.returncode != 0 and "--memory-limit: 'lots' is not a size" in bad.stderr
    lean = _cli("partition", "--input", str(tmp_path / "g.npz"), "--num-parts", "2",
                "--out", str(out), "--regime", "lean")
    assert lean.returncode == 0, lean.stderr
    assert "memory plan: lean (--regime lean)" in lean.stderr
    assert read_config(out / "g.json").num_parts == 2


def _text_graph(tmp_path):
    g = community_graph(n=3000)
    ((src, dst),) = g.edges.values()
    np.savetxt(tmp_path / "g.txt", np.stack([src, dst], 1), fmt="%d")
    np.save(tmp_path / "feat.npy", g.ndata["_N"]["feat"])
    return ["--input", str(tmp_path / "g.txt"), "--node-data", f"feat={tmp_path / 'feat.npy'}",
            "--num-parts", "2"]


def test_a_text_input_is_parsed_into_files_in_the_lean_regime(tmp_path, monkeypatch, capsys):
    from dglctl.cli import main
    from partitioner import spill
    from partitioner.readers import text

    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 4096)  # this graph's columns: tens of KB
    monkeypatch.setattr(text, "CHUNK_ROWS", 1000)
    args = _text_graph(tmp_path)
    assert main(["partition", *args, "--out", str(tmp_path / "fast"), "--regime", "fast"]) == 0
    assert "memory-mapped files" not in capsys.readouterr().err
    assert main(["partition", *args, "--out", str(tmp_path / "lean"), "--regime", "lean"]) == 0
    err = capsys.readouterr().err
    assert "input: parsed a chunk at a time into memory-mapped files in" in err, err
    assert "held in memory" not in err  # the features are mapped from feat.npy itself
    fast, lean = (read_config(tmp_path / r / "g.json") for r in ("fast", "lean"))
    assert {k: v["xxh3_128"] for k, v in fast.files.items()} == \
        {k: v["xxh3_128"] for k, v in lean.files.items()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch left


def test_an_input_read_into_memory_is_moved_to_files_in_the_lean_regime(tmp_path, monkeypatch,
                                                                        capsys):
    import scipy.sparse

    from dglctl.cli import main
    from partitioner import spill

    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 4096)
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1024)
    g = community_graph(n=3000)
    ((src, dst),) = g.edges.values()
    matrix = scipy.sparse.coo_matrix((np.ones(len(src), np.float32), (src, dst)), (3000, 3000))
    scipy.sparse.save_npz(tmp_path / "g.npz", matrix)
    args = ["--input", str(tmp_path / "g.npz"), "--num-parts", "2"]
    assert main(["partition", *args, "--out", str(tmp_path / "fast"), "--regime", "fast"]) == 0
    assert "memory-mapped files" not in capsys.readouterr().err
    assert main(["partition", *args, "--out", str(tmp_path / "lean"), "--regime", "lean"]) == 0
    err = capsys.readouterr().err
    assert "held in memory moved to memory-mapped files" in err, err
    fast, lean = (read_config(tmp_path / r / "g.json") for r in ("fast", "lean"))
    assert {k: v["xxh3_128"] for k, v in fast.files.items()} == \
        {k: v["xxh3_128"] for k, v in lean.files.items()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_the_parsed_input_is_removed_when_the_run_fails(tmp_path, monkeypatch, capsys):
    import partitioner.pipeline as pipeline
    from dglctl.cli import main
    from partitioner import spill

    def boom(*args, **kwargs):
        raise RuntimeError("symmetrize failed")

    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 4096)
    monkeypatch.setattr(pipeline, "symmetric_csr", boom)
    code = main(["partition", *_text_graph(tmp_path), "--out", str(tmp_path / "p"),
                 "--regime", "lean"])
    assert code != 0
    assert "parsed a chunk at a time into memory-mapped files" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feat.npy", "g.txt"]


def test_a_bad_line_past_the_first_chunks_is_named_and_the_parse_removed(tmp_path, monkeypatch,
                                                                         capsys):
    from dglctl.cli import main
    from partitioner import spill
    from partitioner.readers import text

    monkeypatch.setattr(spill, "STREAM_MIN_BYTES", 4096)
    monkeypatch.setattr(text, "CHUNK_ROWS", 1000)
    args = _text_graph(tmp_path)
    lines = (tmp_path / "g.txt").read_text().splitlines()
    lines[-3] = "12 x"
    (tmp_path / "g.txt").write_text("\n".join(lines) + "\n")
    code = main(["partition", *args, "--out", str(tmp_path / "p"), "--regime", "lean"])
    assert code != 0
    err = capsys.readouterr().err
    assert f"g.txt:{len(lines) - 2}" in err and "'x' is not an integer" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feat.npy", "g.txt"]
