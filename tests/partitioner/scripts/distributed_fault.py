"""One rank of ``python -m partitioner.distributed`` that fails on purpose.

``FAULT=kill`` / ``FAULT=raise``: rank ``FAULT_RANK`` (env) at its ``FAULT_AT``-th exchange
kills itself (SIGKILL, as the OOM killer would) or raises.

``FAULT=mid-write``: rank ``FAULT_RANK`` raises while rank ``WRITER_RANK`` is in the middle of
writing its part, in an order fixed by events (files in ``FAULT_EVENTS``), not by timing:

1. the writer, about to open its first shard (its folder made), says ``writing`` and waits
   for ``failed``;
2. the failing rank, about to open its first shard, waits for ``writing``, then raises;
3. once the failing rank has printed its error (and before it aborts every rank), it says
   ``failed`` and waits for ``wrote``;
4. the writer opens its shard, says ``wrote`` (only if that open succeeded) and goes on.

Every wait ends after ``FAULT_TIMEOUT`` seconds.
"""

import os
import signal
import sys
import time
from pathlib import Path

import partitioner.distributed.pipeline as pipeline
import partitioner.format as fmt
from partitioner.distributed.__main__ import main

calls = 0
real_exchange = pipeline.exchange


def failing_exchange(comm, *args, **kwargs):
    global calls
    calls += 1
    if comm.Get_rank() == int(os.environ["FAULT_RANK"]) and calls == int(os.environ["FAULT_AT"]):
        print(f"rank {comm.Get_rank()} fails now (pid {os.getpid()})", file=sys.stderr, flush=True)
        if os.environ["FAULT"] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("injected failure")
    return real_exchange(comm, *args, **kwargs)


def _rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def _say(event: str) -> None:
    (Path(os.environ["FAULT_EVENTS"]) / event).touch()


def _wait(event: str) -> None:
    path = Path(os.environ["FAULT_EVENTS"]) / event
    deadline = time.monotonic() + float(os.environ["FAULT_TIMEOUT"])
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def mid_write() -> None:
    """Hook the first file each rank opens for a shard (after its folder is made, before the
    file is: where a folder removed under a writer makes its open fail)."""
    real_open = open
    real_write = os.write
    first = [True]

    def shard_open(path, *args, **kwargs):
        if not first[0]:
            return real_open(path, *args, **kwargs)
        first[0] = False
        rank = _rank()
        if rank == int(os.environ["WRITER_RANK"]):
            _say("writing")
            _wait("failed")
            f = real_open(path, *args, **kwargs)
            _say("wrote")
            return f
        if rank == int(os.environ["FAULT_RANK"]):
            _wait("writing")
            print(f"rank {rank} fails now (pid {os.getpid()})", file=sys.stderr, flush=True)
            raise RuntimeError("injected failure")
        return real_open(path, *args, **kwargs)

    def write(fd, data):
        n = real_write(fd, data)
        if fd == 2 and data.startswith(b'{"error"') and _rank() == int(os.environ["FAULT_RANK"]):
            _say("failed")
            _wait("wrote")
        return n

    fmt.open = shard_open  # the name ShardWriter's writes look up first: the module's
    os.write = write


if os.environ["FAULT"] == "mid-write":
    mid_write()
else:
    pipeline.exchange = failing_exchange
sys.exit(main(sys.argv[1:]))
