"""One rank of ``python -m partitioner.distributed`` that fails on purpose: rank
``FAULT_RANK`` (env) at its ``FAULT_AT``-th exchange either kills itself (``FAULT=kill``:
SIGKILL, as the OOM killer would) or raises (``FAULT=raise``)."""

import os
import signal
import sys

import partitioner.distributed.pipeline as pipeline
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


pipeline.exchange = failing_exchange
sys.exit(main(sys.argv[1:]))
