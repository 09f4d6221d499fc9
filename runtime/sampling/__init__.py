"""Neighbour sampling: compiled kernels, keyed draws, blocks and pair graphs, and the distributed sampling API."""
