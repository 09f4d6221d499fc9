"""The output folder of a distributed run: one temporary folder per file system, put in place
only when every rank has written its parts.

Ranks on one host (or on hosts that share the output's file system) write into the same
temporary folder, which rank 0 makes before any rank starts; a host that does not see rank 0's
folder makes its own at the same path and holds the parts it writes. On each file system the
lowest rank that sees the folder puts it in place, after every rank has finished (a barrier),
so a folder named ``out`` is whole on every host or absent.

A rank that fails never removes the folder: the others may still be writing into it until the
abort reaches them. Each rank records itself in the folder (:func:`partitioner.format.
mark_writer`), so the folder is removed (by the launcher once mpiexec has ended, else by the
next run: :func:`partitioner.format.remove_stale_temps`) only when every rank that wrote into it
on that host has ended.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..format import WRITER_MARK, check_output_dir, commit_output, mark_writer, remove_stale_temps

_RANK = "rank-"


@contextlib.contextmanager
def shared_output_dir(comm: Any, out: Path, overwrite: bool) -> Iterator[Path]:
    """Collective: yield this rank's temporary folder for ``out``; on success every file
    system's folder becomes ``out`` (after a barrier). On an exception the folder stays as it
    is (other ranks may be writing into it) and the caller aborts every rank
    (:mod:`partitioner.distributed.__main__` does); an error in rank 0's checks, raised on
    every rank before any rank has written, leaves nothing."""
    rank = comm.Get_rank()
    error = None
    tmp_name = None
    if rank == 0:
        tmp = None
        try:
            check_output_dir(out, overwrite)
            out.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(out)
            tmp_name = f".{out.name}.tmp-{os.getpid()}"
            tmp = out.parent / tmp_name
            if tmp.exists():  # a dead run's, whose PID this process now has
                shutil.rmtree(tmp)
            tmp.mkdir()
            mark_writer(tmp, f"{_RANK}0")
        except Exception as exc:  # every rank raises it, below
            error = exc
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)  # no other rank has seen it yet
    error, tmp_name = comm.bcast((error, tmp_name), root=0)
    if error is not None:
        raise error
    tmp = out.parent / str(tmp_name)
    if rank != 0:
        if not tmp.exists():
            # Another host (or a file system rank 0 does not share): the same rules here.
            check_output_dir(out, overwrite)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir(exist_ok=True)  # ranks of that host may race to make it
        mark_writer(tmp, f"{_RANK}{rank}")
    comm.Barrier()
    seen = sorted(int(p.name[len(WRITER_MARK + _RANK):])
                  for p in tmp.glob(f"{WRITER_MARK}{_RANK}*"))
    committer = seen[0] == rank
    yield tmp
    comm.Barrier()  # every rank's parts are written
    if committer:
        for p in tmp.glob(f"{WRITER_MARK}*"):
            p.unlink()
        commit_output(tmp, out)
    comm.Barrier()
