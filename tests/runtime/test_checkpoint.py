"""runtime.checkpoint: atomic, collective checkpoints (round trip, keep, crashes, bad input)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from partitioner.format import file_checksum
from runtime import checkpoint as ckpt
from runtime.errors import CheckpointError
from runtime.split import trainer_share
from testing.procs import terminate_groups
from testing.servers import REPO
from testing.timeouts import TIMEOUT


@pytest.fixture(autouse=True)
def world_of_one(monkeypatch):
    """This process as the one trainer (other tests may have left RANK/WORLD_SIZE set)."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def _train(standalone, tag: str, steps: int = 3):
    """A model, Adam, a DistEmbedding and its SparseAdam after ``steps`` training steps."""
    import runtime as dg
    from runtime.embedding import DistEmbedding
    from runtime.optim import SparseAdam

    g = dg.DistGraph("g", part_config=str(standalone))
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    uniform = lambda shape, dtype: torch.empty(shape, dtype=dtype).uniform_(-1, 1)  # noqa: E731
    emb = DistEmbedding(g.num_nodes(), 4, name=f"emb_{tag}", init_func=uniform)
    sparse = SparseAdam([emb], lr=0.05)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        _step(model, opt, emb, sparse, rng.integers(0, g.num_nodes(), 64))
    return g, model, opt, emb, sparse


def _step(model, opt, emb, sparse, ids) -> None:
    loss = ((model(emb(ids)) - 1) ** 2).mean()
    opt.zero_grad()
    sparse.zero_grad()
    loss.backward()
    opt.step()
    sparse.step()


def _snapshot(model, opt, emb, sparse) -> dict:
    every = np.arange(emb.num_embeddings)
    return {"model": copy.deepcopy(model.state_dict()), "opt": copy.deepcopy(opt.state_dict()),
            "rows": emb.weight[every].clone(),
            "sparse": [s[every].clone() for s in sparse._states(emb)],
            "lr": sparse._lr}


def _assert_same(a, b, where="") -> None:
    """Equal, tensors bit for bit, recursively."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.unit
def test_round_trip_restores_everything_bit_for_bit(standalone, tmp_path):
    g, model, opt, emb, sparse = _train(standalone, "rt")
    before = _snapshot(model, opt, emb, sparse)
    extra = {"epoch": 3, "best": 0.5, "history": [1.0, 2.0], "seed": torch.tensor([7])}
    path = ckpt.save(tmp_path, 10, model=model, optimizer=opt, sparse_optimizers=[sparse],
                     embeddings=[emb], extra=extra)
    assert path == tmp_path / "step-000000000010"
    assert (tmp_path / "latest").read_text().strip() == "step-000000000010"
    assert sorted(p.name for p in path.iterdir()) == [
        "emb-emb_rt-rank0.pt", "extra.pt", "meta.json", "model.pt", "optimizer.pt",
        "rng-rank0.pt", "sparse-0-rank0.pt"]
    meta = json.loads((path / "meta.json").read_text())
    assert meta["step"] == 10 and meta["world_size"] == 1 and meta["graph_name"] == "g"
    assert meta["model"]["params"]["0.weight"] == [8, 4]
    assert meta["embeddings"]["emb_rt"] == {"shape": [g.num_nodes(), 4],
                                            "rows_per_rank": [g.num_nodes()]}
    assert meta["sparse_optimizers"][0]["kind"] == "adam"
    assert meta["files"]["model.pt"]["xxh3_128"] == file_checksum(path / "model.pt")
    # Perturb everything, then restore.
    _step(model, opt, emb, sparse, np.arange(100))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    every = np.arange(g.num_nodes())
    emb.weight[every] = torch.zeros(g.num_nodes(), 4)
    for s in sparse._states(emb):
        s[every] = torch.zeros(s.shape)
    sparse._lr = 9.0
    got = ckpt.load_latest(tmp_path, model=model, optimizer=opt, sparse_optimizers=[sparse],
                           embeddings=[emb])
    assert got is not None
    assert (got.step, got.path, got.world_size) == (10, path, 1)
    _assert_same(got.extra, extra)
    _assert_same(_snapshot(model, opt, emb, sparse), before)
    # DistributedDataParallel's keys would start with "module.": the bare model's are saved.
    assert not any(k.startswith("module.") for k in meta["model"]["params"])


@pytest.mark.unit
def test_keep_two_latest_names_the_newest(tmp_path):
    model = _model()
    for step in (1, 2, 3):
        ckpt.save(tmp_path, step, model=model, extra={"step": step})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest", "step-000000000002", "step-000000000003"]
    assert (tmp_path / "latest").read_text().strip() == "step-000000000003"
    got = ckpt.load_latest(tmp_path, model=model)
    assert got is not None and got.step == 3 and got.extra == {"step": 3}
    # keep=1 leaves only the new one; a step saved again replaces the old folder.
    ckpt.save(tmp_path, 3, model=model, extra={"step": "again"}, keep=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000000000003"]
    got = ckpt.load_latest(tmp_path)
    assert got is not None and got.extra == {"step": "again"}


@pytest.mark.unit
def test_rolled_back_run_drops_later_steps(tmp_path):
    """Resumed from step 2 while step 3 exists: saving step 2 again replaces it and drops 3."""
    for step in (1, 2, 3):
        ckpt.save(tmp_path, step, extra=step, keep=5)
    ckpt.save(tmp_path, 2, extra="two again", keep=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest", "step-000000000001", "step-000000000002"]


@pytest.mark.unit
def test_crash_mid_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model = _model()
    opt = torch.optim.Adam(model.parameters())
    ckpt.save(tmp_path, 1, model=model, optimizer=opt)
    saved = copy.deepcopy(model.state_dict())
    real_save = torch.save
    calls = []

    def failing_save(obj, f, *args, **kwargs):
        calls.append(f)
        if len(calls) == 2:
            raise RuntimeError("simulated crash while writing")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", failing_save)
    with torch.no_grad():
        model[0].weight.add_(1.0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        ckpt.save(tmp_path, 2, model=model, optimizer=opt)
    monkeypatch.setattr(torch, "save", real_save)
    tmp = tmp_path / ".step-000000000002.tmp"
    assert (tmp / "model.pt").exists()  # the save died after writing some files
    assert (tmp_path / "latest").read_text().strip() == "step-000000000001"
    assert not (tmp_path / "step-000000000002").exists()
    got = ckpt.load_latest(tmp_path, model=model, optimizer=opt)
    assert got is not None and got.step == 1
    _assert_same(model.state_dict(), saved)
    # The next save (another step) removes what the crash left.
    ckpt.save(tmp_path, 3, model=model, optimizer=opt)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest", "step-000000000001", "step-000000000003"]


@pytest.mark.unit
def test_lost_latest_and_a_crash_between_the_renames(tmp_path):
    """Without ``latest``, the newest complete folder is used; a folder a crash left moved
    aside (``.step-N.old``) is found, and put back by the next save."""
    for step in (1, 2):
        ckpt.save(tmp_path, step, extra=step)
    (tmp_path / "latest").unlink()
    (tmp_path / "step-000000000002").rename(tmp_path / ".step-000000000002.old")
    (tmp_path / "step-000000000001" / "meta.json").unlink()  # incomplete: never chosen
    got = ckpt.load_latest(tmp_path)
    assert got is not None and got.extra == 2
    ckpt.save(tmp_path, 3, extra=3, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest", "step-000000000002", "step-000000000003"]


@pytest.mark.unit
def test_no_checkpoint_is_none(tmp_path):
    assert ckpt.load_latest(tmp_path) is None
    assert ckpt.load_latest(tmp_path / "missing", model=_model()) is None
    (tmp_path / ".step-000000000001.tmp").mkdir()  # a crashed first save
    assert ckpt.load_latest(tmp_path) is None


@pytest.mark.unit
def test_corrupted_file_is_named(tmp_path):
    model = _model()
    path = ckpt.save(tmp_path, 1, model=model, extra={"a": 1})
    data = bytearray((path / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "model.pt").write_bytes(data)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(CheckpointError, match=r"model\.pt fails its checksum") as e:
        ckpt.load_latest(tmp_path, model=model)
    assert str(path) in str(e.value)
    _assert_same(model.state_dict(), before)
    (path / "extra.pt").unlink()
    with pytest.raises(CheckpointError, match=r"extra\.pt is missing"):
        ckpt.load_latest(tmp_path)


class _Renamed(torch.nn.Module):
    def __init__(self, hidden: int = 8, name: str = "head") -> None:
        super().__init__()
        self.body = torch.nn.Linear(4, hidden)
        setattr(self, name, torch.nn.Linear(hidden, 1))


@pytest.mark.unit
def test_another_model_is_refused_and_nothing_restored(tmp_path):
    ckpt.save(tmp_path, 1, model=_Renamed(), optimizer=torch.optim.SGD(_model().parameters(),
                                                                       lr=0.1),
              graph_name="g")
    renamed = _Renamed(name="out")
    before = copy.deepcopy(renamed.state_dict())
    with pytest.raises(CheckpointError) as e:
        ckpt.load_latest(tmp_path, model=renamed)
    msg = str(e.value)
    assert "out.weight" in msg and "out.bias" in msg  # in the model, not saved
    assert "head.weight" in msg and "head.bias" in msg  # saved, not in the model
    assert "nothing was restored" in msg
    _assert_same(renamed.state_dict(), before)
    reshaped = _Renamed(hidden=5)
    with pytest.raises(CheckpointError, match=r"body\.weight \(saved \(8, 4\), model \(5, 4\)\)"):
        ckpt.load_latest(tmp_path, model=reshaped)
    with pytest.raises(CheckpointError, match="saved for graph 'g', not 'other'"):
        ckpt.load_latest(tmp_path, model=_Renamed(), graph_name="other")
    with pytest.raises(CheckpointError, match="the optimizer was SGD"):
        ckpt.load_latest(tmp_path, optimizer=torch.optim.Adam(_model().parameters()))


class _Opaque:
    """Picklable, but a safe load (``weights_only``) refuses to run its code."""


@pytest.mark.unit
def test_extra_must_be_plain_data(tmp_path):
    class Local:
        pass

    with pytest.raises(CheckpointError, match="extra=_Opaque: not plain data"):
        ckpt.save(tmp_path, 1, extra=_Opaque())
    with pytest.raises(CheckpointError, match="extra=Local: not plain data"):
        ckpt.save(tmp_path, 1, extra=Local())
    assert ckpt.load_latest(tmp_path) is None


@pytest.mark.unit
def test_another_embedding_is_refused(standalone, tmp_path):
    from runtime.embedding import DistEmbedding

    _, _, _, emb, sparse = _train(standalone, "shape", steps=1)
    ckpt.save(tmp_path, 1, embeddings=[emb], sparse_optimizers=[sparse])
    wider = DistEmbedding(emb.num_embeddings, 5, name="emb_shape_wide")
    with pytest.raises(CheckpointError, match=r"holds embeddings \['emb_shape'\]"):
        ckpt.load_latest(tmp_path, embeddings=[wider])


@pytest.mark.unit
def test_rows_of_a_larger_world_are_all_restored(standalone, tmp_path):
    """A checkpoint of two trainers, loaded by one: it restores both trainers' rows."""
    _, _, _, emb, sparse = _train(standalone, "w2")
    path = ckpt.save(tmp_path, 4, embeddings=[emb], sparse_optimizers=[sparse])
    before = _snapshot(_model(), torch.optim.SGD(_model().parameters(), lr=1), emb, sparse)
    # Split rank 0's files into two ranks' (even ids, odd ids), as two trainers write them.
    meta = json.loads((path / "meta.json").read_text())
    for prefix in ("emb-emb_w2", "sparse-0"):
        whole = torch.load(path / f"{prefix}-rank0.pt", weights_only=True)
        for r in (0, 1):
            if prefix.startswith("emb"):
                pick = whole["ids"] % 2 == r
                part = {"ids": whole["ids"][pick], "rows": whole["rows"][pick]}
            else:
                st = whole["emb_states"]["emb_w2"]
                pick = st["ids"] % 2 == r
                part = {"params": whole["params"], "emb_states": {"emb_w2": {
                    "ids": st["ids"][pick],
                    "states": {k: v[pick] for k, v in st["states"].items()}}}}
            name = f"{prefix}-rank{r}.pt"
            torch.save(part, path / name)
            meta["files"][name] = {"size": (path / name).stat().st_size,
                                   "xxh3_128": file_checksum(path / name)}
    meta["world_size"] = 2
    (path / "meta.json").write_text(json.dumps(meta))
    every = np.arange(emb.num_embeddings)
    emb.weight[every] = torch.zeros(emb.num_embeddings, 4)
    for s in sparse._states(emb):
        s[every] = torch.zeros(s.shape)
    got = ckpt.load_latest(tmp_path, embeddings=[emb], sparse_optimizers=[sparse])
    assert got is not None and got.world_size == 2
    after = _snapshot(_model(), torch.optim.SGD(_model().parameters(), lr=1), emb, sparse)
    _assert_same(after["rows"], before["rows"])
    _assert_same(after["sparse"], before["sparse"])


@pytest.mark.unit
def test_trainer_shares_partition_the_rows():
    """Two machines of two trainers each (ranks machine * 2 + local): every id exactly once."""
    owner = np.random.default_rng(0).integers(0, 2, 1000)
    book = SimpleNamespace(partid2nids=lambda part, _t: np.flatnonzero(owner == part))
    shares = []
    for rank in range(4):
        policy = SimpleNamespace(partition_book=book, is_node=True, part_id=rank // 2,
                                 type_name="_N")
        tensor = SimpleNamespace(store=SimpleNamespace(env=SimpleNamespace(num_trainers=2)),
                                 part_policy=policy)
        shares.append(trainer_share(tensor, rank))  # type: ignore[arg-type]
    ids = np.concatenate(shares)
    assert len(ids) == 1000 and (np.sort(ids) == np.arange(1000)).all()


_TWO_TRAINERS = textwrap.dedent("""
    import sys, numpy as np, torch
    import runtime as dg
    from runtime import checkpoint as ckpt
    from runtime.embedding import DistEmbedding
    from runtime.optim import SparseAdam
    dg.initialize()
    g = dg.DistGraph("g")
    rank, folder = int(sys.argv[1]), sys.argv[2]
    n = g.num_nodes()
    every = np.arange(n)
    uniform = lambda shape, dtype: torch.empty(shape, dtype=dtype).uniform_(-1, 1)
    emb = DistEmbedding(n, 3, name="emb", init_func=uniform)
    opt = SparseAdam([emb], lr=0.05)
    rng = np.random.default_rng(rank)
    for _ in range(5):
        ids = rng.integers(0, n, 64)
        loss = ((emb(ids) - 1) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    ckpt.save(folder, 7, embeddings=[emb], sparse_optimizers=[opt], extra={"by": "both"})
    rows, states = emb.weight[every], [s[every] for s in opt._states(emb)]
    g.barrier()  # both have read the saved rows before any is overwritten
    if rank == 0:
        emb.weight[every] = torch.zeros(n, 3)
        for s in opt._states(emb):
            s[every] = torch.zeros(s.shape)
    g.barrier()
    got = ckpt.load_latest(folder, embeddings=[emb], sparse_optimizers=[opt])
    assert got is not None and got.step == 7 and got.extra == {"by": "both"}, got
    assert torch.equal(emb.weight[every], rows)
    for s, saved in zip(opt._states(emb), states):
        assert torch.equal(s[every], saved), s.name
    print("ok", rank)
""")


@pytest.mark.multiprocess
def test_two_trainers_save_each_row_once_and_restore_it(cluster, tmp_path):
    folder = tmp_path / "ckpt"
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(2):
            env = cluster.env("trainer", rank, num_trainers=1)
            env.update(RANK=str(rank), WORLD_SIZE="2")  # as the launcher sets them
            procs.append(subprocess.Popen(
                [sys.executable, "-c", _TWO_TRAINERS, str(rank), str(folder)], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True))
        for p in procs:
            out, err = p.communicate(timeout=6 * TIMEOUT)
            assert p.returncode == 0, err
            assert out.startswith("ok")
    finally:
        terminate_groups(procs, grace=TIMEOUT)
    path = folder / "step-000000000007"
    meta = json.loads((path / "meta.json").read_text())
    n = meta["embeddings"]["emb"]["shape"][0]
    assert meta["world_size"] == 2 and sum(meta["embeddings"]["emb"]["rows_per_rank"]) == n
    ids = [torch.load(Path(path, f"emb-emb-rank{r}.pt"), weights_only=True)["ids"].numpy()
           for r in (0, 1)]
    assert all(len(i) > 0 for i in ids)  # each machine's trainer wrote its own rows
    union = np.concatenate(ids)
    assert len(union) == n and (np.sort(union) == np.arange(n)).all()  # no row lost or twice
    sparse = [torch.load(Path(path, f"sparse-0-rank{r}.pt"), weights_only=True)
              for r in (0, 1)]
    for r in (0, 1):
        np.testing.assert_array_equal(sparse[r]["emb_states"]["emb"]["ids"].numpy(), ids[r])


@pytest.mark.unit
def test_random_generators_are_restored_by_the_same_world(tmp_path):
    """After a load, torch's, numpy's and Python's generators draw what they drew right after
    the save (dropout and shuffles of a resumed run match the uninterrupted run's)."""
    import random

    model = _model()
    torch.manual_seed(11)
    np.random.seed(12)
    random.seed(13)
    ckpt.save(tmp_path, 1, model=model)

    def draws():
        return (torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random(),
                torch.nn.functional.dropout(torch.ones(8), 0.5).tolist())

    after_save = draws()
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    assert draws() != after_save
    assert ckpt.load_latest(tmp_path, model=model) is not None
    assert draws() == after_save
    torch.manual_seed(0)
    ckpt.load_latest(tmp_path, model=model, rng=False)
    assert draws() != after_save


_SAVING_LOOP = textwrap.dedent("""
    import sys
    import torch
    from runtime import checkpoint as ckpt

    torch.manual_seed(0)
    model = torch.nn.Linear(1024, 1024)  # 4 MiB of weights: a save takes a while
    opt = torch.optim.Adam(model.parameters())
    step = 0
    while True:
        step += 1
        with torch.no_grad():
            model.weight.fill_(float(step))
        ckpt.save(sys.argv[1], step, model=model, optimizer=opt, extra={"step": step})
        print(step, flush=True)
""")


@pytest.mark.multiprocess
def test_sigkill_at_any_moment_of_a_save_leaves_a_whole_checkpoint(tmp_path):
    """A trainer SIGKILLed while it saves, at five moments: each time the newest checkpoint
    that loads is whole (its weights are those of its step) and no older than the last save
    that returned; the next save removes what the killed one left."""
    script = tmp_path / "saving.py"
    script.write_text(_SAVING_LOOP)
    folder = tmp_path / "ckpt"
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "PYTHONPATH": str(REPO)}
    rng = np.random.default_rng(0)
    for attempt in range(5):
        proc = subprocess.Popen([sys.executable, str(script), str(folder)], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, text=True)
        try:
            done = [int(proc.stdout.readline()) for _ in range(2)]  # two saves returned
            time.sleep(float(rng.uniform(0, 0.3)))  # then somewhere in a later one
            proc.kill()
            rest = proc.communicate(timeout=TIMEOUT)[0].split()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(TIMEOUT)
        returned = max(done + [int(s) for s in rest])
        model = torch.nn.Linear(1024, 1024)
        got = ckpt.load_latest(folder, model=model, optimizer=torch.optim.Adam(
            model.parameters()))
        assert got is not None and got.step >= returned, (attempt, returned)
        assert got.extra == {"step": got.step}
        assert torch.equal(model.weight, torch.full((1024, 1024), float(got.step)))
    # What the kills left (a .tmp folder, a moved-aside old one) goes with the next save.
    ckpt.save(folder, 10_000, extra={"step": 10_000})
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]
