"""The output folder of a distributed run: one temporary folder per file system, put in place
only when every rank has written its parts.

Ranks on one host (or on hosts that share the output's file system) write into the same
temporary folder; a host that does not see rank 0's folder makes its own at the same path and
holds the parts it writes. On each file system the lowest rank that sees the folder puts it in
place, after every rank has finished (a barrier), so a folder named ``out`` is whole on every
host or absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..format import check_output_dir, commit_output, remove_stale_temps

_MARK = ".rank-"


@contextlib.contextmanager
def shared_output_dir(comm: Any, out: Path, overwrite: bool) -> Iterator[Path]:
    """Collective: yield this rank's temporary folder for ``out``; on success every file
    system's folder becomes ``out`` (after a barrier), on an exception this rank removes the
    folder it made. A rank that fails leaves the others waiting in the next collective call:
    the caller aborts the job (:mod:`partitioner.distributed.__main__` does)."""
    rank = comm.Get_rank()
    error = None
    tmp_name = None
    if rank == 0:
        try:
            check_output_dir(out, overwrite)
            out.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(out)
            tmp_name = f".{out.name}.tmp-{os.getpid()}"
        except Exception as exc:  # every rank raises it, below
            error = exc
    error, tmp_name = comm.bcast((error, tmp_name), root=0)
    if error is not None:
        raise error
    tmp = out.parent / str(tmp_name)
    made = False
    try:
        if rank != 0 and not tmp.exists():
            # Another host (or a file system rank 0 does not share): check the same rules here.
            check_output_dir(out, overwrite)
        out.parent.mkdir(parents=True, exist_ok=True)
        if rank == 0 and tmp.exists():
            shutil.rmtree(tmp)
        comm.Barrier()  # rank 0 has cleared the way before anyone makes the folder
        made = not tmp.exists()
        tmp.mkdir(exist_ok=True)
        (tmp / f"{_MARK}{rank}").touch()
        comm.Barrier()
        seen = sorted(int(p.name[len(_MARK):]) for p in tmp.glob(f"{_MARK}*"))
        committer = seen[0] == rank
        yield tmp
        comm.Barrier()  # every rank's parts are written
        if committer:
            for p in tmp.glob(f"{_MARK}*"):
                p.unlink()
            commit_output(tmp, out)
        comm.Barrier()
    except BaseException:
        if made or rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
