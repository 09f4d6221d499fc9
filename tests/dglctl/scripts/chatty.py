"""A trainer for the log tests; behaviour chosen by argv[1]:

big MIB   each rank prints MIB MiB of numbered lines (UTF-8, several bytes a character), rank 0
          also one line of 1.5 MiB; then a last line without its newline; exits 0.
marks F   prints "early" lines, waits until file F exists, prints "late" lines, sleeps (until
          stopped).
"""

import os
import sys
import time

import numpy as np

import runtime


def line(rank: int, i: int) -> str:
    """Line ``i`` of rank ``rank``: what the tests expect, byte for byte."""
    return f"rank {rank} line {i:07d} héllo wörld 漢字 {'x' * (i % 97)}"


mode = sys.argv[1]
runtime.initialize()
g = runtime.DistGraph("g")
rank = int(os.environ["RANK"])
g.ndata["feat"][np.arange(4)]  # a request: the servers leave once every client has gone
out = sys.stdout
if mode == "big":
    target, written, i = float(sys.argv[2]) * 2**20, 0, 0
    while written < target:
        text = line(rank, i) + "\n"
        out.write(text)
        written += len(text.encode())
        i += 1
        if rank == 0 and i == 1000:
            out.write("long " + "é" * (3 * 2**19) + " end\n")  # 1.5 MiB: longer than a read
    out.write(f"rank {rank} wrote {i} lines; no newline after this")
    out.flush()
elif mode == "marks":
    for i in range(50):
        out.write(f"rank {rank} early {i}\n")
    out.write(f"rank {rank} early done\n")
    out.flush()
    deadline = time.monotonic() + 600
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for i in range(50):
        out.write(f"rank {rank} late {i}\n")
    out.write(f"rank {rank} late done\n")
    out.flush()
    time.sleep(600)
