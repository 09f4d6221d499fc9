"""One trainer of ``bench/epoch_floor.py``: the example's epoch, phase by phase, and each
phase's floor on the same batches, in the same process, with the same threads.

Every trainer runs ``--steps`` steps of the example's loop (the loader, ``NeighborSampler``
[10, 25], ``load_subtensor``, ``runtime.nn.SAGE``, Adam; no DDP, whose all-reduce is not a
phase with a floor here) and keeps each batch. Trainer 0 then measures, alternating ours and
the floor ``--repeat`` times on those batches (the other trainer answers its byte requests):

- forward and backward: ``SAGE`` on the blocks against (a), a bare torch loop of the same
  arithmetic on the same features, its adjacency matrices built beforehand;
- fetch: ``load_subtensor`` again against (b), the same remote bytes moved by bare pyzmq
  from the other trainer's process (request, reply, no copy) plus a numpy gather of the
  local rows from the local shared-memory features;
- sampling: ``sampler.sample_blocks`` on each batch's seeds again (the servers asked for
  the remote seeds' edges, as in the epoch) against (c), the same sampling in this process
  on the local partition (every seed of each layer, remote ones replaced by as many local
  ones, since their edges are elsewhere) and the blocks built from it. The loader's wait in
  the epoch itself (both trainers working, the cores shared) is reported as
  ``epoch_sample``.

Trainer 0 prints one JSON line: ``{"ours": {...}, "floor": {...}, "steps", ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
import zmq

import runtime
from runtime import NID, DistDataLoader, DistGraph, NeighborSampler, node_split
from runtime.nn import SAGE
from runtime.nn.dropout import Dropout
from runtime.routing import split_by_owner
from runtime.sampling.block import block_from_edges


def _bare_batch(blocks, x):
    """What the bare loop needs of one batch: per layer the mean adjacency (CSR, rows scaled
    by 1/in-degree) and the number of destination nodes; built here, outside the timing."""
    layers = []
    for b in blocks:
        crow, col, _ = b.csr()
        n_dst = b.num_dst_nodes()
        deg = (crow[1:] - crow[:-1]).clamp(min=1).to(torch.float32)
        vals = (1.0 / deg).repeat_interleave(crow[1:] - crow[:-1])
        adj = torch.sparse_csr_tensor(crow, col, vals, (n_dst, b.num_src_nodes()))
        layers.append((adj, n_dst))
    return layers, x


class BareSAGE(torch.nn.Module):
    """The same arithmetic as ``SAGE`` (mean aggregator, ReLU and dropout between layers),
    written as bare torch on precomputed adjacency matrices: the floor of forward/backward."""

    def __init__(self, sizes: list[int], dropout: float) -> None:
        super().__init__()
        self.self_w = torch.nn.ModuleList(
            torch.nn.Linear(a, b, bias=False) for a, b in zip(sizes, sizes[1:], strict=False))
        self.neigh_w = torch.nn.ModuleList(
            torch.nn.Linear(a, b, bias=False) for a, b in zip(sizes, sizes[1:], strict=False))
        self.bias = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(b)) for b in sizes[1:])
        self.dropout = Dropout(dropout)  # the model's (torch's CPU dropout is 3x slower)

    def forward(self, layers, h):
        for i, (adj, n_dst) in enumerate(layers):
            fin, fout = self.neigh_w[i].in_features, self.neigh_w[i].out_features
            # The cheaper order, as SAGEConv picks it.
            if adj.shape[1] * fin * fout + adj.values().numel() * fout < \
                    adj.values().numel() * fin + n_dst * fin * fout:
                neigh = adj @ self.neigh_w[i](h)
            else:
                neigh = self.neigh_w[i](adj @ h)
            h = self.self_w[i](h[:n_dst]) + neigh + self.bias[i]
            if i < len(layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def _timed_steps(model, opt, batches, forward):
    """Forward and backward seconds of one pass over ``batches`` (``forward(model, b)``
    returns the loss)."""
    fwd = bwd = 0.0
    for b in batches:
        t0 = time.perf_counter()
        loss = forward(model, b)
        t1 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        opt.step()
        fwd += t1 - t0
        bwd += time.perf_counter() - t1
    return fwd, bwd


def _serve_bytes(port_file: str, stop: threading.Event) -> None:
    """Trainer 1's part of floor (b): reply to each request of N bytes with N bytes."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REP)
    port = sock.bind_to_random_port("tcp://127.0.0.2")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    payload = np.zeros(1 << 20, np.uint8)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    while not stop.is_set():
        if not poller.poll(100):
            continue
        n = int.from_bytes(sock.recv(), "little")
        if len(payload) < n:
            payload = np.zeros(n, np.uint8)
        sock.send(memoryview(payload)[:n], copy=False)
    sock.close(linger=0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--graph-name", default="bench")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--fan-out", default="10,25")
    p.add_argument("--num-hidden", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rendezvous", required=True, help="a folder both trainers see")
    args = p.parse_args()

    runtime.initialize()
    torch.distributed.init_process_group(backend="gloo")
    rank = torch.distributed.get_rank()
    g = DistGraph(args.graph_name)
    pb = g.get_partition_book()
    train_nid = node_split(g.ndata["train_mask"], pb, force_even=True)
    feat = g.ndata["feat"]
    in_feats = feat.shape[1]
    n_classes = int(g.ndata["label"][np.arange(g.num_nodes())].max()) + 1
    fanouts = [int(f) for f in args.fan_out.split(",")]
    torch.manual_seed(0)
    sampler = NeighborSampler(g, fanouts, runtime.sample_neighbors, "cpu", seed=0)
    loader = DistDataLoader(dataset=train_nid.numpy(), batch_size=args.batch_size,
                            collate_fn=sampler.sample_blocks, shuffle=True, drop_last=False,
                            seed=0, prefetch=False)  # each phase's own cost, in the step
    model = SAGE(in_feats, args.num_hidden, n_classes, len(fanouts), F.relu, 0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)

    # The epoch as the example runs it, kept batch by batch.
    ours = {"sample": 0.0, "fetch": 0.0, "forward": 0.0, "backward": 0.0}
    batches = []
    tick = time.perf_counter()
    for step, blocks in enumerate(loader):
        if step >= args.steps:
            break
        t1 = time.perf_counter()
        x, y = feat[blocks[0].srcdata[NID]], g.ndata["label"][blocks[-1].dstdata[NID]]
        t2 = time.perf_counter()
        loss = F.cross_entropy(model(blocks, x), y)
        t3 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t4 = time.perf_counter()
        ours["sample"] += t1 - tick
        ours["fetch"] += t2 - t1
        ours["forward"] += t3 - t2
        ours["backward"] += t4 - t3
        batches.append((blocks, x, y))
        tick = time.perf_counter()

    stop = threading.Event()
    port_file = os.path.join(args.rendezvous, "floor-port")
    if rank == 1:
        server = threading.Thread(target=_serve_bytes, args=(port_file, stop), daemon=True)
        server.start()
    torch.distributed.barrier()
    if rank == 0:
        print(json.dumps(_floors(args, g, model, sampler, batches, ours, port_file)),
              flush=True)
    torch.distributed.barrier()
    stop.set()
    torch.distributed.destroy_process_group()


def _floors(args, g, model, sampler, batches, ours, port_file):
    """Trainer 0's measurements: each phase ours and its floor, alternating, best of
    ``args.repeat``."""
    feat = g.ndata["feat"]
    key, book, me = feat.name, g.get_partition_book(), g.machine_id
    local_feat = g.local.tensor(key)
    n_local = len(local_feat)
    rng = np.random.default_rng(0)

    # (a) forward and backward on the same batches.
    sizes = [feat.shape[1], *(layer.fc_neigh.out_features for layer in model.layers)]
    bare = BareSAGE(sizes, 0.5)
    bare_opt = torch.optim.Adam(bare.parameters(), lr=0.003)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    prepared = [(_bare_batch(blocks, x), y) for blocks, x, y in batches]

    def ours_step(m, b):
        blocks, x, y = b
        for block in blocks:  # built in each step of the epoch: counted, as there
            block.__dict__.pop("_csr_cache", None)
        return F.cross_entropy(m(blocks, x), y)

    def bare_step(m, b):
        (layers, x), y = b
        return F.cross_entropy(m(layers, x), y)

    # (b) the fetch's bytes: remote rows from the other process, local rows gathered here.
    ctx = zmq.Context.instance()
    while not os.path.exists(port_file):
        time.sleep(0.01)
    sock = ctx.socket(zmq.REQ)
    with open(port_file) as f:
        sock.connect(f"tcp://127.0.0.2:{f.read()}")
    row_bytes = int(np.prod(feat.shape[1:])) * np.dtype(local_feat.dtype).itemsize
    fetches = []
    remote_bytes = 0
    for blocks, _, _ in batches:
        ids = blocks[0].srcdata[NID].numpy()
        shares = split_by_owner(ids, book.nodes, g.ntypes[0])
        local = np.concatenate([s.local for s in shares if s.machine == me] or [ids[:0]])
        n_remote = len(ids) - len(local)
        fetches.append((local, n_remote * row_bytes))
        remote_bytes += n_remote * row_bytes

    def bare_fetch():
        for local, nbytes in fetches:
            sock.send(int(nbytes).to_bytes(8, "little"))
            np.take(local_feat, local, axis=0)
            reply = sock.recv(copy=False)
            np.frombuffer(reply.buffer, np.uint8)

    def our_fetch():
        for blocks, _, _ in batches:
            feat[blocks[0].srcdata[NID]]

    # (c) sampling in this process on the local partition.
    etype = ":".join(g.canonical_etypes[0])
    num_nodes = {t: g.num_nodes(t) for t in g.ntypes}
    start = int(book.nodes.typed_start[me, 0])
    fanouts = [int(f) for f in args.fan_out.split(",")]
    layers = []
    for blocks, _, _ in batches:
        per_layer = []
        for block, fanout in zip(reversed(blocks), reversed(fanouts), strict=True):
            dst = block.dstdata[NID].numpy()
            mine = dst[(dst >= start) & (dst < start + n_local)] - start
            extra = rng.integers(0, n_local, len(dst) - len(mine))
            per_layer.append((np.concatenate([mine, extra]), fanout))
        layers.append(per_layer)

    batch_seeds = [blocks[-1].dstdata[NID] for blocks, _, _ in batches]

    def our_sample():
        for s in batch_seeds:
            sampler.sample_blocks(s)

    def bare_sample():
        for per_layer in layers:
            for seeds, fanout in per_layer:
                s_idx, nbr, pos = g.local.sample(etype, seeds, 0, fanout, False, 0)
                # Each edge's seed by its position, as the library's sampler hands it.
                block_from_edges({g.ntypes[0]: seeds + start},
                                 {g.canonical_etypes[0]: (nbr, s_idx, pos)}, num_nodes,
                                 dst_positions=True)

    best = {k: float("inf") for k in ("forward", "backward", "floor_forward", "floor_backward",
                                      "fetch", "floor_fetch", "sample", "floor_sample")}
    # One untimed pass of each first: the bare loop's first sparse matmuls, the socket's
    # first messages and the local partition's first reads are not what is measured.
    _timed_steps(model, opt, batches, ours_step)
    _timed_steps(bare, bare_opt, prepared, bare_step)
    for fn in (our_fetch, bare_fetch, our_sample, bare_sample):
        fn()
    for _ in range(args.repeat):
        f, b = _timed_steps(model, opt, batches, ours_step)
        best["forward"], best["backward"] = min(best["forward"], f), min(best["backward"], b)
        f, b = _timed_steps(bare, bare_opt, prepared, bare_step)
        best["floor_forward"] = min(best["floor_forward"], f)
        best["floor_backward"] = min(best["floor_backward"], b)
        for name, fn in (("fetch", our_fetch), ("floor_fetch", bare_fetch),
                         ("sample", our_sample), ("floor_sample", bare_sample)):
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    sock.close(linger=0)
    return {"steps": len(batches), "threads": torch.get_num_threads(),
            "remote_bytes": remote_bytes,
            "ours": {"sample": best["sample"], "fetch": best["fetch"],
                     "forward": best["forward"], "backward": best["backward"],
                     "epoch_sample": ours["sample"], "epoch_fetch": ours["fetch"],
                     "epoch_forward": ours["forward"], "epoch_backward": ours["backward"]},
            "floor": {"sample": best["floor_sample"], "fetch": best["floor_fetch"],
                      "forward": best["floor_forward"], "backward": best["floor_backward"]}}


if __name__ == "__main__":
    main()
