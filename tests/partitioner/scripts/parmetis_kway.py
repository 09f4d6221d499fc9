"""Run under mpiexec: every rank takes its block of one generated graph's symmetric CSR and
calls ParMETIS_V3_PartKway (partitioner.methods.parmetis); rank 0 gathers the parts and prints
one JSON line: the library, the parts' sizes, the cut against a random assignment's, and the
balance of the training nodes (a second weight column)."""

import json
import sys

import numpy as np
from mpi4py import MPI

from partitioner.generate import generate_graph
from partitioner.graph import etype_key
from partitioner.methods.parmetis import part_kway
from partitioner.symmetric import symmetric_csr

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nodes, parts = int(sys.argv[1]), int(sys.argv[2])
g = generate_graph(nodes, avg_degree=8, seed=5)
(src, dst), = g.edges.values()
indptr, indices = symmetric_csr(src, dst, nodes)
vtxdist = np.linspace(0, nodes, size + 1).astype(np.int64)
lo, hi = int(vtxdist[rank]), int(vtxdist[rank + 1])
xadj = indptr[lo:hi + 1] - indptr[lo]
adjncy = indices[indptr[lo]:indptr[hi]]
train = g.ndata[g.ntypes[0]]["train_mask"].astype(np.int64)
weights = np.stack([np.ones(hi - lo, np.int64), train[lo:hi]], axis=1)
got = part_kway(comm, vtxdist, xadj, adjncy, parts, vweights=weights)
part = comm.gather(got.part, root=0)
if rank == 0:
    part = np.concatenate(part)
    rows = np.repeat(np.arange(nodes), np.diff(indptr))
    cut = int(np.count_nonzero(part[rows] != part[indices])) // 2
    rand = np.random.default_rng(0).integers(0, parts, nodes)
    rand_cut = int(np.count_nonzero(rand[rows] != rand[indices])) // 2
    sizes = np.bincount(part, minlength=parts)
    train_sizes = np.bincount(part, weights=train, minlength=parts)
    print(json.dumps({"library": got.library.flavour, "idx_bits": got.library.idx_bits,
                      "nodes": int(len(part)), "min": int(part.min()), "max": int(part.max()),
                      "sizes": sizes.tolist(), "cut": cut, "reported_cut": got.edgecut,
                      "random_cut": rand_cut,
                      "balance": float(sizes.max() / sizes.mean()),
                      "train_balance": float(train_sizes.max() / train_sizes.mean()),
                      "etype": etype_key(next(iter(g.edges)))}), flush=True)
