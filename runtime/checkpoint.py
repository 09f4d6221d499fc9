"""Atomic, collective checkpoints of a training job: ``save`` and ``load_latest``.

Layout of a checkpoint ``directory`` (it must be one folder every trainer's host sees, e.g. on
NFS, since each trainer writes its own part and trainer 0 renames the whole)::

    directory/
      latest                       the name of the newest committed folder ("step-000000000010")
      step-000000000009/           an older one, kept (``keep``)
      step-000000000010/
        meta.json                  what was saved: step, world size, graph, shapes, checksums
        model.pt                   the model's state_dict (trainer 0)
        optimizer.pt               the torch optimizer's state_dict (trainer 0)
        extra.pt                   the caller's plain data (trainer 0)
        emb-NAME-rankR.pt          ids and rows of trainer R's share of DistEmbedding NAME
        sparse-I-rankR.pt          trainer R's share of sparse optimizer I (its local_state_dict)
        rng-rankR.pt               trainer R's random generators (torch, numpy, random, CUDA)
      .step-000000000011.tmp/      a save in progress (or a crashed one: removed by the next)

A save writes into the ``.tmp`` folder, records every file's size and xxh3-128 in
``meta.json``, fsyncs, renames the folder to ``step-…`` and then replaces ``latest``: a crash at
any point leaves the previous checkpoint whole and named by ``latest``.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import pickle
import random
import re
import shutil
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.distributed as dist
import xxhash

from partitioner.format import file_checksum

from .context import get_context
from .env import current_attempt, torch_rank_world
from .errors import CheckpointError
from .split import trainer_share

if TYPE_CHECKING:
    from .embedding import DistEmbedding
    from .optim import DistSparseGradOptimizer

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
LATEST = "latest"
META = "meta.json"
_STEP = re.compile(r"step-(\d{12,})")
_TMP = re.compile(r"\.step-(\d{12,})\.tmp")
_OLD = re.compile(r"\.step-(\d{12,})\.old")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_SHARED_FS_HINT = ("the checkpoint directory must be one folder shared by every trainer's host "
                   "(e.g. on NFS), at the same path")


@dataclass(frozen=True)
class Checkpoint:
    """What ``load_latest`` restored.

    Attributes:
        step: the step given to ``save``: resume training after it.
        path: the checkpoint's folder.
        extra: the ``extra`` given to ``save`` (None if none).
        world_size: the number of trainers that saved it (may differ from this job's).
    """

    step: int
    path: Path
    extra: Any
    world_size: int


# --- save ----------------------------------------------------------------------------------
def save(
    directory: str | os.PathLike[str],
    step: int,
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    sparse_optimizers: Sequence[DistSparseGradOptimizer] = (),
    embeddings: Iterable[DistEmbedding] = (),
    extra: Any = None,
    keep: int = 2,
    graph_name: str | None = None,
) -> Path:
    """Save a checkpoint of ``step`` into ``directory`` (collective: every trainer calls it
    with the same arguments) and return its folder, ``directory/step-{step:012d}``.

    Trainer 0 writes ``model`` (a DistributedDataParallel's inner module, so the checkpoint
    loads into the bare model too), ``optimizer`` and ``extra`` (plain data: dicts, lists,
    numbers, strings, tensors); every trainer writes its share of each ``DistEmbedding``'s rows
    and of each sparse optimizer's state (:func:`trainer_share`). The folder is committed
    atomically, then ``latest`` names it; it and the ``keep - 1`` newest earlier checkpoints
    stay, older ones are removed. Every trainer also saves the state of its random generators
    (torch's, numpy's global one, Python's ``random``, CUDA's when in use), which a load by the
    same number of trainers restores: with the loaders' state (``DistDataLoader.state_dict``
    in ``extra``) a resumed run draws what the uninterrupted run drew (dropout included).
    ``graph_name`` (default: the name of the current ``DistGraph``, if any) is recorded so that
    a load into another graph's job is refused.

    A checkpoint of the same step replaces the old one. Checkpoints of later steps (a run that
    was rolled back to an earlier one) are removed. If a trainer fails, the others wait in the
    next barrier until its timeout; the previous checkpoint stays usable.
    """
    directory = Path(directory)
    step = int(step)
    if step < 0:
        raise CheckpointError(f"checkpoint step {step}: must be >= 0")
    if keep < 1:
        raise CheckpointError(f"keep={keep}: at least the checkpoint just saved is kept (>= 1)")
    rank, world = torch_rank_world()
    embeddings = list(embeddings)
    sparse_optimizers = list(sparse_optimizers)
    _check_embedding_names(embeddings)
    if extra is not None:
        _check_plain(extra)
    graph_name = graph_name if graph_name is not None else _current_graph_name()
    check_shared(directory)
    name = f"step-{step:012d}"
    tmp = directory / f".{name}.tmp"
    if rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
        _tidy(directory)
        tmp.mkdir()
    _barrier(world)
    files: dict[str, dict[str, Any]] = {}
    rows: dict[str, int] = {}
    hyper: list[dict[str, Any]] = []  # each sparse optimizer's hyper-parameters
    try:
        if rank == 0:
            if model is not None:
                files["model.pt"] = _write(tmp, "model.pt", _unwrap(model).state_dict())
            if optimizer is not None:
                files["optimizer.pt"] = _write(tmp, "optimizer.pt", optimizer.state_dict())
            if extra is not None:
                files["extra.pt"] = _write(tmp, "extra.pt", extra)
        for emb in embeddings:
            ids = trainer_share(emb.weight, rank)
            part = {"ids": torch.from_numpy(ids), "rows": emb.weight[ids]}
            fname = f"emb-{emb.name}-rank{rank}.pt"
            files[fname] = _write(tmp, fname, part)
            rows[emb.name] = len(ids)
        for i, opt in enumerate(sparse_optimizers):
            fname = f"sparse-{i}-rank{rank}.pt"
            local = opt.local_state_dict()
            files[fname] = _write(tmp, fname, local)
            hyper.append({k: v for k, v in local["params"].items() if k != "world_size"})
        fname = f"rng-rank{rank}.pt"
        files[fname] = _write(tmp, fname, _rng_state())
        _write_json(tmp / f"rank-{rank}.json", {"rank": rank, "files": files, "rows": rows})
    except OSError as e:
        full = _no_space_error(e, tmp)
        if full is None:
            raise
        raise full from e
    _barrier(world)  # every trainer's part is on disk
    if rank == 0:
        meta = _meta(step, world, graph_name, model, optimizer, sparse_optimizers, hyper,
                     embeddings, extra is not None)
        _commit(directory, tmp, name, meta, world, embeddings, keep)
    _barrier(world)  # no trainer goes on (or loads) before the checkpoint is committed
    return directory / name


def _rng_state() -> dict[str, Any]:
    """This process's random generators, as what ``torch.load(weights_only=True)`` reads."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    assert isinstance(keys, np.ndarray)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                  float(gauss)),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _check_embedding_names(embeddings: list[DistEmbedding]) -> None:
    names = [e.name for e in embeddings]
    for n in names:
        if not _SAFE_NAME.fullmatch(n):
            raise CheckpointError(f"DistEmbedding {n!r}: its name becomes a file name in the "
                                  "checkpoint; letters, digits, '_', '.' and '-' only",
                                  hint="give the embedding such a name")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CheckpointError(f"embeddings {dup} are given more than once")


def _check_plain(extra: Any) -> None:
    """Refuse now, not at resume time days later, an ``extra`` a safe load cannot read."""
    buf = io.BytesIO()
    try:
        torch.save(extra, buf)
        buf.seek(0)
        torch.load(buf, weights_only=True)
    # Unpicklable (a local class, a lambda), or not loadable without running its code.
    except (pickle.PickleError, AttributeError, TypeError) as e:
        # torch's message is long; its line naming the type is the useful one.
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
        first = (f"it holds a {found.group(1)}" if found else
                 (str(e).strip().splitlines() or [type(e).__name__])[0])
        raise CheckpointError(
            f"extra={type(extra).__name__}: not plain data that a checkpoint can load safely "
            f"({first})",
            hint="keep extra to dicts, lists, tuples, numbers, strings and tensors (e.g. "
                 "float(x) for a numpy number)") from None


def _current_graph_name() -> str | None:
    graphs = get_context().graphs
    return str(graphs[-1].graph_name) if graphs else None


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DistributedDataParallel (or DataParallel): its keys lack the
    ``module.`` prefix, so a checkpoint loads into the bare model as well."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    return model.module if isinstance(model, wrappers) else model


_SHARED: set[tuple[str, int]] = set()  # (folder, world) this process has seen shared
_MARK = ".visible-"


def check_shared(directory: str | os.PathLike[str]) -> None:
    """Collective (every trainer calls it, as :func:`save` and :func:`load_latest` do): that
    ``directory`` is one folder every trainer sees, else a CheckpointError on every trainer,
    before any checkpoint is read or written. Once per folder and process.

    Each trainer writes a mark of its rank there; after a barrier each counts the marks. In one
    shared folder every trainer sees all of them; where hosts have folders of their own (a
    relative path lands in each host's copy of the project, or a local disk), every trainer sees
    fewer, so all of them raise, the same error. The error is ``permanent``: a restart would
    meet the same folders, so the launcher does not spend one on it.
    """
    path = Path(directory)
    rank, world = torch_rank_world()
    key = (str(path.absolute()), world)
    if world == 1 or key in _SHARED:
        return
    # The same name on every trainer of this attempt, another on the next one.
    env = get_context().env
    tag = f"{env.job_id if env is not None else 'job'}-{current_attempt()}-{len(_SHARED)}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        mark = path / f"{_MARK}{tag}-rank{rank}"
        mark.write_text(f"{socket.gethostname()}\n")
    except OSError as e:
        full = _no_space_error(e, path)
        raise (full or CheckpointError(f"checkpoint directory {path}: cannot write there "
                                       f"({e.strerror})")) from e
    try:
        _barrier(world)  # every trainer has written its mark
        seen = len(list(path.glob(f"{_MARK}{tag}-rank*")))
        _barrier(world)  # every trainer has counted
    finally:
        mark.unlink(missing_ok=True)
    if seen < world:
        relative = "" if path.is_absolute() else (
            "; it is a relative path, so each host has its own, in its copy of the project")
        raise CheckpointError(
            f"checkpoint directory {path}: trainer {rank} on {socket.gethostname()} sees the "
            f"marks of {seen} of the {world} trainers there, so it is not one folder that "
            f"every trainer's host shares{relative}",
            hint=f"{_SHARED_FS_HINT}: give an absolute path on a shared file system, or train "
                 "on one host", permanent=True)
    _SHARED.add(key)


def _barrier(world: int) -> None:
    """Wait for every trainer: torch.distributed's barrier when it is set up, else the job's
    trainer barrier (the current DistGraph's); nothing to wait for in a world of one."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        return
    if world == 1:
        return
    ctx = get_context()
    if not ctx.standalone and ctx.graphs:
        ctx.graphs[-1].barrier()
        return
    raise CheckpointError(
        f"a checkpoint is collective over the {world} trainers (WORLD_SIZE), but there is no "
        "way to wait for them: torch.distributed is not initialized and no DistGraph exists",
        hint="call torch.distributed.init_process_group or create the DistGraph first")


def _write(folder: Path, name: str, obj: Any) -> dict[str, Any]:
    """torch.save ``obj`` to ``folder/name``, durably; its size and checksum (xxh3-128 of the
    bytes as they are written: reading the file back cost a fifth of the save)."""
    path = folder / name
    with open(path, "wb") as f:
        hashed = _HashingWriter(f)
        torch.save(obj, cast(IO[bytes], hashed))  # torch.save only writes and flushes
        f.flush()
        os.fsync(f.fileno())
    return {"size": path.stat().st_size, "xxh3_128": hashed.digest.hexdigest()}


class _HashingWriter:
    """A write-only file that hashes what goes through it (what ``torch.save`` writes to)."""

    def __init__(self, f: io.BufferedWriter) -> None:
        self.f = f
        self.digest = xxhash.xxh3_128()

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    """Make a folder's entries (created, renamed files) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_space_error(e: OSError, tmp: Path) -> CheckpointError | None:
    """The CheckpointError for a full disk or quota, else None (the OSError stands)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return CheckpointError(
            f"checkpoint {tmp}: no space left writing {e.filename or 'it'} "
            f"({errno.errorcode[e.errno]}); the previous checkpoint is intact",
            hint=f"free space on the file system of {tmp.parent} (`df -h {tmp.parent}`), "
                 "lower keep=, or checkpoint to another folder")
    return None


def _meta(step: int, world: int, graph_name: str | None, model: torch.nn.Module | None,
          optimizer: torch.optim.Optimizer | None,
          sparse_optimizers: list[DistSparseGradOptimizer], hyper: list[dict[str, Any]],
          embeddings: list[DistEmbedding], has_extra: bool) -> dict[str, Any]:
    """What a load checks before restoring anything (all but ``files``, added at commit)."""
    return {
        "format": FORMAT_VERSION,
        "step": step,
        "world_size": world,
        "graph_name": graph_name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": None if model is None else {
            "class": type(_unwrap(model)).__name__,
            "params": _shapes(_unwrap(model).state_dict())},
        "optimizer": None if optimizer is None else {
            "class": type(optimizer).__name__,
            "group_sizes": [len(g["params"]) for g in optimizer.state_dict()["param_groups"]]},
        "embeddings": {e.name: {"shape": [e.num_embeddings, e.embedding_dim]}
                       for e in embeddings},
        "sparse_optimizers": [
            {"class": type(o).__name__, "kind": o.kind, "embeddings": [e.name for e in o.params],
             "params": params}
            for o, params in zip(sparse_optimizers, hyper, strict=True)],
        "extra": has_extra,
    }


def _shapes(state: dict[str, Any]) -> dict[str, list[int] | None]:
    return {k: (list(v.shape) if isinstance(v, torch.Tensor) else None)
            for k, v in state.items()}


def _commit(directory: Path, tmp: Path, name: str, meta: dict[str, Any], world: int,
            embeddings: list[DistEmbedding], keep: int) -> None:
    """Trainer 0: gather the trainers' file lists, check every row was written once, write
    meta.json, rename the folder, point ``latest`` at it and drop old checkpoints."""
    files: dict[str, Any] = {}
    rows: dict[str, list[int]] = {e.name: [] for e in embeddings}
    for r in range(world):
        manifest = tmp / f"rank-{r}.json"
        if not manifest.exists():
            raise CheckpointError(f"checkpoint {tmp}: trainer {r}'s part ({manifest.name}) is "
                                  "not there; nothing was committed", hint=_SHARED_FS_HINT)
        part = json.loads(manifest.read_text())
        files.update(part["files"])
        for emb_name, count in part["rows"].items():
            rows.setdefault(emb_name, []).append(int(count))
        manifest.unlink()
    for emb in embeddings:
        if sum(rows[emb.name]) != emb.num_embeddings:
            raise CheckpointError(
                f"checkpoint {tmp}: the trainers' shares of DistEmbedding {emb.name!r} hold "
                f"{sum(rows[emb.name])} rows ({rows[emb.name]} by rank), not its "
                f"{emb.num_embeddings}: rows would be lost or written twice; nothing was "
                "committed",
                hint="trainer ranks must be machine_id * num_trainers + local index, as "
                     "dglctl launch sets RANK")
        meta["embeddings"][emb.name]["rows_per_rank"] = rows[emb.name]
    for fname, info in files.items():  # a trainer that wrote to another host's disk
        path = tmp / fname
        if not path.exists() or path.stat().st_size != info["size"]:
            raise CheckpointError(f"checkpoint {tmp}: {fname} is missing or incomplete; "
                                  "nothing was committed", hint=_SHARED_FS_HINT)
    meta["files"] = dict(sorted(files.items()))
    _write_json(tmp / META, meta)
    _fsync_dir(tmp)
    final = directory / name
    old = directory / f".{name}.old"
    if final.exists():  # the same step saved again: move the old aside (``_tidy`` undoes it)
        os.rename(final, old)
    os.rename(tmp, final)
    _fsync_dir(directory)
    _write_latest(directory, name)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    _prune(directory, int(meta["step"]), keep)
    logger.info("checkpoint %s committed (%d files)", final, len(files))


def _write_latest(directory: Path, name: str) -> None:
    tmp = directory / f"{LATEST}.tmp"
    with open(tmp, "w") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / LATEST)
    _fsync_dir(directory)


def _tidy(directory: Path) -> None:
    """Before a save (trainer 0): remove what crashed saves left (``.step-*.tmp``,
    ``latest.tmp``), and put back a checkpoint a crash left moved aside (``.step-*.old``
    whose ``step-*`` is missing)."""
    for entry in directory.iterdir():
        if _TMP.fullmatch(entry.name) and entry.is_dir():
            logger.info("removing %s, left by a save that did not finish", entry)
            shutil.rmtree(entry)
        elif (found := _OLD.fullmatch(entry.name)) and entry.is_dir():
            committed = directory / f"step-{found.group(1)}"
            if committed.exists():
                shutil.rmtree(entry)
            else:
                os.rename(entry, committed)
    (directory / f"{LATEST}.tmp").unlink(missing_ok=True)


def _prune(directory: Path, step: int, keep: int) -> None:
    """Keep the checkpoint of ``step`` and the ``keep - 1`` newest earlier ones. Later steps
    belong to a run rolled back to ``step``: kept, a lost ``latest`` would resume from them."""
    committed = sorted(((int(m.group(1)), p) for p in directory.iterdir()
                        if (m := _STEP.fullmatch(p.name)) and p.is_dir()), reverse=True)
    earlier = [p for s, p in committed if s < step]
    for path in [p for s, p in committed if s > step] + earlier[keep - 1:]:
        try:
            shutil.rmtree(path)
        except OSError as e:  # the new checkpoint is committed: an old one left is no failure
            logger.warning("could not remove old checkpoint %s: %s", path, e)


# --- load ----------------------------------------------------------------------------------
def latest_path(directory: str | os.PathLike[str]) -> Path | None:
    """The folder of the newest committed checkpoint in ``directory``, or None.

    The one ``latest`` names; if ``latest`` is missing or names a folder that is gone, the
    complete (``meta.json``) ``step-*`` folder of the highest step."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    pointer = directory / LATEST
    named = pointer.read_text().strip() if pointer.is_file() else ""
    if _STEP.fullmatch(named) and (directory / named / META).is_file():
        return directory / named
    found = []
    for p in directory.iterdir():
        m = _STEP.fullmatch(p.name) or _OLD.fullmatch(p.name)
        if m and (p / META).is_file():
            # a ``.old`` folder only counts where a crash left its ``step-*`` missing
            found.append((int(m.group(1)), p.name.startswith("step-"), p))
    if not found:
        return None
    path = max(found, key=lambda f: f[:2])[2]
    logger.warning("checkpoint directory %s: %s %r; using %s", directory, LATEST,
                   named or "is missing", path.name)
    return path


def load_latest(
    directory: str | os.PathLike[str],
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    sparse_optimizers: Sequence[DistSparseGradOptimizer] = (),
    embeddings: Iterable[DistEmbedding] = (),
    graph_name: str | None = None,
    map_location: Any = "cpu",
    rng: bool = True,
) -> Checkpoint | None:
    """Restore the newest checkpoint in ``directory`` (:func:`latest_path`) into what is given
    (collective: every trainer calls it); None, restoring nothing, when there is none.

    Each thing given must be in the checkpoint, whole: the model's parameter names and shapes,
    the same embeddings (names and shapes), the same kinds of sparse optimizers; ``graph_name``
    (default: the current ``DistGraph``'s) must match the saved one when both are known. What
    is not given is not restored (e.g. only the model, to evaluate). Every difference, and any
    file this trainer reads that fails its checksum, raises CheckpointError before anything is
    restored.

    The number of trainers may differ from the one that saved: rows carry their ids, and
    trainer ``r`` of ``W`` restores the rows and sparse state saved by trainers ``r, r + W,
    r + 2W, ...``, so every saved row is restored exactly once, whoever owns it now (with more
    trainers than before, the extra ones restore no rows). Every trainer restores the model,
    optimizer and sparse optimizers' hyper-parameters; with ``rng`` (the default) and as many
    trainers as saved, each also gets back its random generators' state.
    """
    rank, world = torch_rank_world()
    embeddings = list(embeddings)
    sparse_optimizers = list(sparse_optimizers)
    check_shared(directory)
    folder = latest_path(directory)
    if folder is None:
        _barrier(world)
        return None
    meta = _read_meta(folder)
    graph_name = graph_name if graph_name is not None else _current_graph_name()
    _check_compatible(folder, meta, graph_name, model, optimizer, sparse_optimizers,
                      embeddings)
    old_world = int(meta["world_size"])
    old_ranks = range(rank, old_world, world)
    reads = ((["model.pt"] if model is not None else [])
             + (["optimizer.pt"] if optimizer is not None else [])
             + (["extra.pt"] if meta["extra"] else [])
             + [f"emb-{e.name}-rank{r}.pt" for e in embeddings for r in old_ranks]
             + [f"sparse-{i}-rank{r}.pt" for i in range(len(sparse_optimizers))
                for r in old_ranks])
    rng_file = f"rng-rank{rank}.pt"
    restore_rng = rng and old_world == world and rng_file in meta["files"]
    if restore_rng:
        reads.append(rng_file)
    for fname in reads:
        _verify(folder, meta, fname)

    def read(fname: str) -> Any:
        return torch.load(folder / fname, map_location=map_location, weights_only=True)

    # Everything checked: restore.
    if model is not None:
        _unwrap(model).load_state_dict(read("model.pt"))
    if optimizer is not None:
        optimizer.load_state_dict(read("optimizer.pt"))
    extra = read("extra.pt") if meta["extra"] else None
    with torch.no_grad():
        for emb in embeddings:
            for r in old_ranks:
                part = read(f"emb-{emb.name}-rank{r}.pt")
                emb.weight[part["ids"]] = part["rows"].cpu()
    for i, opt in enumerate(sparse_optimizers):
        for r in old_ranks:
            opt.load_local_state_dict(read(f"sparse-{i}-rank{r}.pt"))
        # Hyper-parameters also on a trainer that read no file (more trainers than saved).
        opt.load_local_state_dict({"emb_states": {},
                                   "params": dict(meta["sparse_optimizers"][i]["params"])})
    if restore_rng:
        _set_rng_state(read(rng_file))
    _barrier(world)  # no trainer trains while another still writes rows
    return Checkpoint(step=int(meta["step"]), path=folder, extra=extra, world_size=old_world)


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = json.loads((folder / META).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {folder}: cannot read {META} ({e})",
                              hint="remove the folder to resume from an older checkpoint"
                              ) from None
    if int(meta.get("format", 0)) > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {folder}: format {meta['format']} is newer than "
                              f"this runtime's ({FORMAT_VERSION})", hint="upgrade dglctl")
    return meta


def _verify(folder: Path, meta: dict[str, Any], fname: str) -> None:
    """``fname`` is listed in meta.json and has its recorded size and checksum."""
    info = meta["files"].get(fname)
    path = folder / fname
    hint = "the checkpoint is damaged: remove the folder to resume from an older one"
    if info is None:
        raise CheckpointError(f"checkpoint {folder}: {META} lists no {fname}", hint=hint)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {folder}: {fname} is missing", hint=hint)
    size = path.stat().st_size
    if size != info["size"]:
        raise CheckpointError(f"checkpoint {folder}: {fname} has {size} bytes, "
                              f"{info['size']} when saved", hint=hint)
    if file_checksum(path) != info["xxh3_128"]:
        raise CheckpointError(f"checkpoint {folder}: {fname} fails its checksum (xxh3-128 "
                              "differs from the one saved)", hint=hint)


def _few(names: Iterable[str], n: int = 3) -> str:
    names = sorted(names)
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def _check_compatible(folder: Path, meta: dict[str, Any], graph_name: str | None,
                      model: torch.nn.Module | None, optimizer: torch.optim.Optimizer | None,
                      sparse_optimizers: list[DistSparseGradOptimizer],
                      embeddings: list[DistEmbedding]) -> None:
    """Raise CheckpointError naming every difference between the checkpoint and what is to be
    restored into (before anything is)."""
    where = f"checkpoint {folder}"
    other = "point load_latest at this job's checkpoint directory"
    saved_graph = meta.get("graph_name")
    if graph_name is not None and saved_graph is not None and graph_name != saved_graph:
        raise CheckpointError(f"{where} was saved for graph {saved_graph!r}, not {graph_name!r}",
                              hint=other)
    if model is not None:
        if meta["model"] is None:
            raise CheckpointError(f"{where} holds no model", hint=other)
        _check_model(where, meta["model"]["params"], _shapes(_unwrap(model).state_dict()))
    if optimizer is not None:
        saved = meta["optimizer"]
        if saved is None:
            raise CheckpointError(f"{where} holds no optimizer", hint=other)
        sizes = [len(g["params"]) for g in optimizer.state_dict()["param_groups"]]
        if (saved["class"], saved["group_sizes"]) != (type(optimizer).__name__, sizes):
            raise CheckpointError(
                f"{where}: the optimizer was {saved['class']} with parameter groups of sizes "
                f"{saved['group_sizes']}; this one is {type(optimizer).__name__} with {sizes}",
                hint="build the optimizer as when the checkpoint was saved")
    if embeddings:
        saved_embs = meta["embeddings"]
        names = {e.name for e in embeddings}
        if names != set(saved_embs):
            raise CheckpointError(
                f"{where} holds embeddings {sorted(saved_embs)}, not {sorted(names)} "
                f"(missing from the checkpoint: {_few(names - set(saved_embs)) or 'none'}; "
                f"not given: {_few(set(saved_embs) - names) or 'none'})",
                hint="pass every DistEmbedding the checkpoint holds, under the same names")
        for e in embeddings:
            shape = [e.num_embeddings, e.embedding_dim]
            if saved_embs[e.name]["shape"] != shape:
                raise CheckpointError(
                    f"{where}: DistEmbedding {e.name!r} was saved with shape "
                    f"{tuple(saved_embs[e.name]['shape'])}, this one is {tuple(shape)}",
                    hint="a checkpoint of another graph or model? " + other)
    if sparse_optimizers:
        saved_opts = meta["sparse_optimizers"]
        have = [(o.kind, [e.name for e in o.params]) for o in sparse_optimizers]
        want = [(o["kind"], o["embeddings"]) for o in saved_opts]
        if have != want:
            raise CheckpointError(
                f"{where} holds {len(want)} sparse optimizers (kind, embeddings) {want}; "
                f"given {len(have)}: {have}",
                hint="pass the same sparse optimizers, in the order they were saved")


def _check_model(where: str, saved: dict[str, Any], have: dict[str, Any]) -> None:
    missing = set(have) - set(saved)
    unexpected = set(saved) - set(have)
    shapes = sorted(f"{k} (saved {tuple(saved[k] or ())}, model {tuple(have[k] or ())})"
                    for k in set(saved) & set(have) if saved[k] != have[k])
    if not (missing or unexpected or shapes):
        return
    parts = []
    if missing:
        parts.append(f"{len(missing)} of the model's keys not in the checkpoint: "
                     f"{_few(missing)}")
    if unexpected:
        parts.append(f"{len(unexpected)} saved keys not in the model: {_few(unexpected)}")
    if shapes:
        parts.append(f"{len(shapes)} of different shape: {_few(shapes)}")
    raise CheckpointError(
        f"{where}: the model differs from the one saved; " + "; ".join(parts)
        + "; nothing was restored",
        hint="load into the model the checkpoint was saved from, or point load_latest at "
             "this model's checkpoint directory")
