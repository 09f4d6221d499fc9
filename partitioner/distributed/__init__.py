"""Partitioning across MPI ranks: each rank reads its share of the input, ParMETIS (or a
given or random assignment) places the nodes, and each part is written by the rank that will
hold it, in the single-machine format (``python -m partitioner.distributed`` is one rank)."""

from .pipeline import partition_distributed

__all__ = ["partition_distributed"]
