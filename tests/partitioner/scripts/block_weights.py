"""Run under mpiexec: every rank builds its block's symmetric rows and vertex weights
(partitioner.distributed.assign) of :func:`loopy_graph`; rank 0 gathers them and prints one
JSON line: per run (without and with the in-degree count, whose rows must be the same) the
weights' names, every node's weights in homogeneous id order and the symmetric pairs as
homogeneous ids."""

import json
import sys

import numpy as np

from partitioner.generate import generate_graph
from partitioner.graph import Graph


def loopy_graph(hetero: bool) -> Graph:
    """A generated graph with self-loops and duplicate edges added where a type allows."""
    g = generate_graph(300, avg_degree=5, seed=7, hetero=hetero)
    for etype, (src, dst) in list(g.edges.items()):
        if etype[0] == etype[2]:
            g.edges[etype] = (np.concatenate([src, dst[:7], src[:5]]),
                              np.concatenate([dst, dst[:7], dst[:5]]))
    return g


def main() -> None:
    from mpi4py import MPI

    from partitioner.distributed.assign import block_weights, symmetric_block
    from partitioner.distributed.share import Share

    comm = MPI.COMM_WORLD
    g = loopy_graph(sys.argv[1] == "hetero")
    share = Share.of(g, comm.Get_rank(), comm.Get_size())
    out = {}
    for with_degree in (False, True):
        xadj, adjncy, degree = symmetric_block(comm, g, share, budget=4096,
                                               in_degree=with_degree)
        weights, names = block_weights(comm, g, share, True, degree)
        rows = np.repeat(share.vtxdist[share.rank] + np.arange(share.num_local), np.diff(xadj))
        got = comm.gather((share.homogeneous_ids(), weights, rows, adjncy), root=0)
        if comm.Get_rank() == 0:
            homogeneous = np.concatenate([h for h, _, _, _ in got])  # rank-major -> homogeneous
            w = np.empty((g.total_nodes, weights.shape[1]), np.int64)
            w[homogeneous] = np.concatenate([x for _, x, _, _ in got])
            pairs = np.stack([homogeneous[np.concatenate([r for _, _, r, _ in got])],
                              homogeneous[np.concatenate([a for _, _, _, a in got])]], axis=1)
            out[str(with_degree)] = {"names": names, "weights": w.tolist(),
                                     "pairs": pairs.tolist()}
    if comm.Get_rank() == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
