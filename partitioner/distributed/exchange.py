"""Moving rows between MPI ranks in bounded messages, and looking ids up at their owner.

Every exchange here is collective: all ranks of the communicator call it at once, with columns
of the same dtypes and row shapes. A message never holds more than about ``budget`` bytes for
all destinations together: the rows go in as many rounds as the busiest rank needs (MPI counts
are C ints, and one message per whole array would need the whole array twice in flight).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Bytes one rank sends per round, all destinations together.
DEFAULT_BUDGET = 64 << 20
# Byte offsets MPI takes (C ints): a column or a result this large is packed per round.
_MAX_DISPLACEMENT = 2**31 - 1


def block_bounds(total: int, size: int) -> np.ndarray:
    """``(size + 1,)`` int64 bounds of ``size`` contiguous blocks of ``[0, total)``, as even as
    integers allow (block ``r`` is ``bounds[r]:bounds[r + 1]``)."""
    return (np.arange(size + 1, dtype=np.int64) * int(total)) // int(size)


def _row_bytes(column: np.ndarray) -> int:
    return column.dtype.itemsize * int(np.prod(column.shape[1:], dtype=np.int64))


def exchange(comm: Any, dest: np.ndarray, columns: Sequence[np.ndarray], *,
             budget: int = DEFAULT_BUDGET) -> tuple[list[np.ndarray], np.ndarray]:
    """Send row ``i`` of every column to rank ``dest[i]``; return the columns this rank
    received and how many rows came from each rank.

    Received rows are source-major, each source's rows in the order it held them (the same
    result as one unbounded all-to-all, whatever the number of rounds).
    """
    from mpi4py import MPI

    size = comm.Get_size()
    # A stable sort on a small-int key is numpy's radix sort: one linear pass.
    key = np.asarray(dest).astype(np.int16 if size < 2**15 else np.int64, copy=False)
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=size).astype(np.int64)
    del key
    cols = [np.ascontiguousarray(np.asarray(c)[order]) for c in columns]
    del order
    recv_counts = np.empty(size, np.int64)
    comm.Alltoall(counts, recv_counts)
    row_bytes = max(1, sum(_row_bytes(c) for c in cols))
    per_round = max(1, budget // (row_bytes * size))  # rows per destination per round
    mine = int(-(-int(counts.max(initial=0)) // per_round))
    rounds = int(comm.allreduce(mine, op=MPI.MAX))
    starts = np.cumsum(counts) - counts
    rstarts = np.cumsum(recv_counts) - recv_counts
    out = [np.empty((int(recv_counts.sum()), *c.shape[1:]), c.dtype) for c in cols]
    for k in range(rounds):
        lo, hi = np.minimum(counts, k * per_round), np.minimum(counts, (k + 1) * per_round)
        rlo = np.minimum(recv_counts, k * per_round)
        rhi = np.minimum(recv_counts, (k + 1) * per_round)
        for c, o in zip(cols, out, strict=True):
            width = _row_bytes(c)
            if not width:
                continue
            raw = c.reshape(-1).view(np.uint8)
            dst = o.reshape(-1).view(np.uint8)
            scount, rcount = (hi - lo) * width, (rhi - rlo) * width
            sdispl, rdispl = (starts + lo) * width, (rstarts + rlo) * width
            if max(len(raw), len(dst)) < _MAX_DISPLACEMENT:
                # Straight from the column and into the result: MPI's offsets are C ints.
                comm.Alltoallv([raw, (scount, sdispl), MPI.BYTE],
                               [dst, (rcount, rdispl), MPI.BYTE])
                continue
            send = np.concatenate([raw[sdispl[d]:sdispl[d] + scount[d]] for d in range(size)])
            recv = np.empty(int(rcount.sum()), np.uint8)
            comm.Alltoallv([send, (scount, np.cumsum(scount) - scount), MPI.BYTE],
                           [recv, (rcount, np.cumsum(rcount) - rcount), MPI.BYTE])
            at = 0
            for s in range(size):
                n = int(rcount[s])
                dst[rdispl[s]:rdispl[s] + n] = recv[at:at + n]
                at += n
    return out, recv_counts


def lookup(comm: Any, owner: np.ndarray, local: np.ndarray, table: Sequence[np.ndarray], *,
           budget: int = DEFAULT_BUDGET) -> list[np.ndarray]:
    """Collective: the rows of ``table`` (each rank: one row per node it holds) at the nodes
    rank ``owner[i]`` holds as its local id ``local[i]``, asked in bounded messages. Ask for
    each node once: every row asked costs a row both ways."""
    owner = np.asarray(owner, dtype=np.int64)
    (asked,), from_rank = exchange(comm, owner, [np.asarray(local, np.int64)], budget=budget)
    answers = [np.asarray(t)[asked] for t in table]
    del asked
    back, _ = exchange(comm, np.repeat(np.arange(comm.Get_size()), from_rank), answers,
                       budget=budget)
    # Replies come owner-major, each owner's in the order it was asked: ids stably by owner.
    order = np.argsort(owner, kind="stable")
    result = []
    for b in back:
        r = np.empty_like(b)
        r[order] = b
        result.append(r)
    return result
