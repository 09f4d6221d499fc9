"""Runtime benchmark: sampling, feature pull and server scaling, each against a baseline
measured in the same run (the machine is shared and noisy: compare the ratios).

  1. local 2-layer sampling [10, 25] on 1000 seeds (standalone, in process) - the baseline
     for distributed sampling through the servers on the same seeds (goal: >= 0.5x);
  2. remote feature pull, 10,000 random rows x 128 float32 from the other machine, against a
     bare pyzmq DEALER/ROUTER round trip of the same bytes (goal: >= 0.5x);
  3. local rows against numpy fancy indexing of the same shared array (goal: within 20%);
  4. 4 client processes sampling from (and pulling rows of) the other machine with 1 vs 2
     servers per machine (goal: 2 > 1).
Figures from DGL 1.1.3 on this machine (docs/reference.md) are printed beside ours.

    python -m bench.runtime_bench [--nodes N] [--repeat R] [--json]   (from the repository root)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import DGL_REFERENCE, cpu_jiffies, paired, prepare_parts, timeit
from bench.jobs import free_base, start_servers


class BareZmq:
    """A bare pyzmq DEALER->ROUTER round trip whose reply carries ``nbytes`` (an echo server
    process on 127.0.0.2): the transport baseline of a remote pull."""

    def __init__(self, nbytes: int) -> None:
        import zmq

        code = (
            "import zmq,sys; c=zmq.Context(); s=c.socket(zmq.ROUTER); s.bind(sys.argv[1]); "
            f"buf=bytearray({nbytes})\n"
            "while True:\n"
            "    f=s.recv_multipart()\n"
            "    if f[1]==b'stop': break\n"
            "    s.send_multipart([f[0], b'h', buf])\n"
        )
        addr = f"tcp://127.0.0.2:{free_base(['127.0.0.2'], 1)}"
        self.proc = subprocess.Popen([sys.executable, "-c", code, addr])
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(addr)
        self.req = np.arange(10_000, dtype=np.int64).tobytes()  # the ids a pull sends

    def once(self) -> None:
        self.sock.send_multipart([self.req])
        self.sock.recv_multipart(copy=False)

    def close(self) -> None:
        self.sock.send_multipart([b"stop"])
        self.proc.wait(10)
        self.sock.close(0)


def measure_sampling_and_pull(p1: Path, p2: Path, work: Path, num_nodes: int,
                              repeat: int = 5) -> dict[str, float]:
    """Figures 1-3 of this module on the 1-part (standalone) and 2-part (servers) partitions
    of the same graph: seeds/s and edges/s local vs through the servers, remote pull vs bare
    pyzmq, local rows vs numpy. Runs the trainer side in this process."""
    import runtime as dg
    from partitioner.loader import load_orig_ids
    from runtime.sampling.neighbor import NeighborSampler

    results: dict[str, float] = {}
    saved = dict(os.environ)  # standalone initialize() sets torch.distributed variables
    servers = None
    try:
        # 1. local sampling baseline (standalone, in process)
        dg.initialize()
        g1 = dg.DistGraph("bench", part_config=str(p1))
        rng = np.random.default_rng(0)
        seeds_orig = rng.choice(num_nodes, 1000, replace=False)
        inv1 = np.argsort(load_orig_ids(g1.config)[0]["_N"])
        sampler = NeighborSampler([10, 25])
        edges = sum(b.num_edges() for b in sampler.sample_blocks(inv1[seeds_orig], g1))
        t_local = timeit(lambda: sampler.sample_blocks(inv1[seeds_orig], g1), repeat)
        results["local_seeds_s"] = 1000 / t_local
        results["local_edges_s"] = edges / t_local
        dg.exit_client()

        servers = start_servers(p2, 1, work)
        os.environ.update(servers.env("trainer", 0))
        dg.initialize()
        g2 = dg.DistGraph("bench")
        inv2 = np.argsort(load_orig_ids(g2.config)[0]["_N"])
        results.update(measure_through_servers(g2, inv2[seeds_orig], rng, repeat, edges))
    finally:
        dg.exit_client()
        if servers is not None:
            servers.stop()
        os.environ.clear()
        os.environ.update(saved)
    return results


def measure_through_servers(g, seeds: np.ndarray, rng: np.random.Generator, repeat: int = 5,
                            edges: int | None = None) -> dict[str, float]:
    """Figures 1-3 as the trainer of machine 0 sees them, from this process (``g``: its
    DistGraph, the runtime initialized): sampling [10, 25] of ``seeds`` (DistGraph ids)
    through the servers, seeds/s and edges/s (``edges``: the edges a sample of ``seeds``
    has, counted here from one sample when not given); remote pull of 10k random rows of
    machine 1 against a bare pyzmq round trip of the same bytes; local rows against numpy
    fancy indexing of the same shared array. ``rng`` draws the rows; bench/runtime_scaling
    calls this too."""
    from runtime.sampling.neighbor import NeighborSampler

    sampler = NeighborSampler([10, 25])
    if edges is None:
        edges = sum(b.num_edges() for b in sampler.sample_blocks(seeds, g))
    results: dict[str, float] = {}
    t_dist = timeit(lambda: sampler.sample_blocks(seeds, g), repeat)
    results["dist_seeds_s"] = len(seeds) / t_dist
    results["dist_edges_s"] = edges / t_dist
    # 2. remote pull vs bare zmq
    book = g.get_partition_book()
    remote = book.partid2nids(1)
    local_ids = book.partid2nids(0)
    feat = g.ndata["feat"]
    results["feat_dim"] = feat.shape[1]
    nbytes = 10_000 * feat.shape[1] * 4
    ids: list[np.ndarray] = []

    def draw(pool):  # fresh random rows before each timed pair (not timed)
        ids[:] = [rng.choice(pool, 10_000)]

    bare = BareZmq(nbytes)
    try:
        t_pull, t_bare = paired(lambda: feat[ids[0]], bare.once, repeat * 20,
                                setup=lambda: draw(remote))
    finally:
        bare.close()
    results["pull_remote_gbs"] = nbytes / t_pull / 1e9
    results["bare_zmq_gbs"] = nbytes / t_bare / 1e9
    # 3. local rows vs numpy fancy indexing of the same shared array, the same rows (the
    # second of a pair finds them in cache: the alternating order evens that out)
    arr = g.local.tensor("_N/feat")
    t_loc, t_np = paired(lambda: feat[ids[0]], lambda: arr[ids[0]], repeat * 40,
                         setup=lambda: draw(local_ids))
    results["pull_local_gbs"] = nbytes / t_loc / 1e9
    results["numpy_local_gbs"] = nbytes / t_np / 1e9
    return results


def measure_server_scaling(p2: Path, work: Path, rounds=(1, 2, 2, 1),
                           seconds: float = 6.0, load: str = "pull") -> dict[str, float]:
    """Figure 4: 4 client processes loading the other machine's servers, 1 vs 2 servers per
    machine. ``load`` is ``"pull"`` (10k random rows per request, rows/s) or ``"sample"``
    (one-hop sampling of 1000 seeds with fanout 25 per request, seeds/s).

    The configurations alternate (1, 2, 2, 1) so drifting noise lands on both; each round's
    rate is summed over the clients and averaged per configuration. The machine's CPU use
    during the rounds is recorded too: with every core busy, a second server has no core to
    run on. A pull costs the client about as much CPU as the server (receive and copy vs
    gather and send), so on 2 cores 4 pulling clients leave a second server nothing to run
    on; a sampling request costs the server more than the client (0.45-0.67 ms vs
    0.30-0.36 ms measured alone), yet on 2 cores the clients still fill the other core.
    """
    rates: dict[int, list[float]] = {1: [], 2: []}
    busy: dict[int, list[float]] = {1: [], 2: []}
    for r, num_servers in enumerate(rounds):
        servers = start_servers(p2, num_servers, work)
        outs = [work / f"{load}{num_servers}_{r}_{i}.txt" for i in range(4)]
        try:
            clients = []
            for out in outs:
                env = servers.env("trainer", 0)
                clients.append(subprocess.Popen(
                    [sys.executable, "-c",
                     "import sys; from pathlib import Path; import bench.runtime_bench as b; "
                     "b.client_load_env(int(sys.argv[1]), Path(sys.argv[2]), "
                     "seconds=float(sys.argv[3]), load=sys.argv[4])",
                     "1", str(out), str(seconds), load], env=env))
            time.sleep(seconds / 2)  # the clients' start-up is not part of the load
            b0, t0 = cpu_jiffies()
            time.sleep(seconds / 3)
            b1, t1 = cpu_jiffies()
            for c in clients:
                if c.wait(300) != 0:
                    raise RuntimeError("a load client failed (see its output above)")
            rates[num_servers].append(sum(float(o.read_text()) for o in outs))
            busy[num_servers].append(100.0 * (b1 - b0) / max(1, t1 - t0))
        finally:
            servers.stop()
    unit = "rows_s" if load == "pull" else "seeds_s"
    return {f"{unit}_{k}_servers": float(np.mean(v)) for k, v in rates.items()} | {
        f"cpu_busy_pct_{load}_{k}_servers": float(np.mean(v)) for k, v in busy.items()}


def measure_dgl_setup(p2: Path, work: Path, seconds: float = 6.0) -> dict[str, float]:
    """DGL's distributed set-up of docs/reference.md's figures: 2 machines, one server and one
    trainer each, both trainers working at once. Sampling [10, 25] on batches of 1000 seeds,
    then pulls of 10k random rows of all nodes (a pull mixes local and remote rows, as
    DGL's figure does); seeds/s and GB/s summed over the two trainers."""
    servers = start_servers(p2, 1, work)
    outs = [work / f"dgl_setup_{m}.json" for m in range(2)]
    start = time.time() + 8.0  # both trainers start each phase at the same moment
    try:
        trainers = [subprocess.Popen(
            [sys.executable, "-c",
             "import sys; from pathlib import Path; import bench.runtime_bench as b; "
             "b.trainer_dgl_setup(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))",
             str(out), str(start), str(seconds)],
            env=servers.env("trainer", m)) for m, out in enumerate(outs)]
        for t in trainers:
            if t.wait(300) != 0:
                raise RuntimeError("a DGL-set-up trainer failed (see its output above)")
    finally:
        servers.stop()
    got = [json.loads(o.read_text()) for o in outs]
    return {"two_trainers_seeds_s": sum(g["seeds_s"] for g in got),
            "two_trainers_edges_s": sum(g["edges_s"] for g in got),
            "two_trainers_pull_gbs": sum(g["pull_gbs"] for g in got)}


def trainer_dgl_setup(out: Path, start: float, seconds: float) -> None:
    """Entry of measure_dgl_setup's trainers (env contract already set by the parent)."""
    import runtime as dg
    from runtime.sampling.neighbor import NeighborSampler

    dg.initialize()
    g = dg.DistGraph("bench")
    rng = np.random.default_rng(os.getpid())
    n = g.num_nodes()
    sampler = NeighborSampler([10, 25])
    feat = g.ndata["feat"]
    time.sleep(max(0.0, start - time.time()))
    seeds = edges = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        blocks = sampler.sample_blocks(rng.choice(n, 1000, replace=False), g)
        seeds += 1000
        edges += sum(b.num_edges() for b in blocks)
    t_sample = time.perf_counter() - t0
    time.sleep(max(0.0, start + seconds + 1.0 - time.time()))
    nbytes = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        nbytes += feat[rng.choice(n, 10_000)].numel() * 4
    t_pull = time.perf_counter() - t0
    out.write_text(json.dumps({"seeds_s": seeds / t_sample, "edges_s": edges / t_sample,
                               "pull_gbs": nbytes / t_pull / 1e9}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--feat-dim", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from partitioner.generate import generate_graph

    work = args.workdir or Path(tempfile.mkdtemp(prefix="dglctl-rtbench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    graph = generate_graph(args.nodes, avg_degree=args.avg_degree, feat_dim=args.feat_dim, seed=0)
    parts = prepare_parts(graph, work)
    del graph
    print(f"graph {args.nodes:,} nodes, feat {args.feat_dim} (prepared in "
          f"{time.perf_counter() - t0:.0f}s)", flush=True)
    results = measure_sampling_and_pull(parts[1], parts[2], work, args.nodes, args.repeat)
    results.update(measure_server_scaling(parts[2], work, load="pull"))
    results.update(measure_server_scaling(parts[2], work, load="sample"))
    results.update(measure_dgl_setup(parts[2], work))

    print(f"sampling [10,25], 1000 seeds: local {results['local_seeds_s']:,.0f} seeds/s "
          f"({results['local_edges_s'] / 1e6:.2f}M edges/s); through servers "
          f"{results['dist_seeds_s']:,.0f} seeds/s; ratio {results['dist_seeds_s'] / results['local_seeds_s']:.2f}"
          f" (goal >= 0.5); DGL 1.1.3 distributed here: {DGL_REFERENCE['sampling_seeds_s']:,} seeds/s "
          "(two trainers together)")
    print(f"remote pull 10k x {args.feat_dim} float32: {results['pull_remote_gbs']:.2f} GB/s; bare "
          f"zmq round trip {results['bare_zmq_gbs']:.2f} GB/s; ratio "
          f"{results['pull_remote_gbs'] / results['bare_zmq_gbs']:.2f} (goal >= 0.5); DGL 1.1.3: "
          f"{DGL_REFERENCE['pull_remote_gbs']} GB/s from the other partition")
    print(f"local rows: {results['pull_local_gbs']:.2f} GB/s vs numpy fancy indexing "
          f"{results['numpy_local_gbs']:.2f} GB/s; ratio "
          f"{results['pull_local_gbs'] / results['numpy_local_gbs']:.2f} (goal >= 0.8)")
    for load, unit, what in (("sample", "seeds_s", "seeds/s sampled (fanout 25)"),
                             ("pull", "rows_s", "rows/s pulled")):
        one, two = results[f"{unit}_1_servers"], results[f"{unit}_2_servers"]
        print(f"4 clients, remote {what}: 1 server/machine {one:,.0f}, 2 servers/machine "
              f"{two:,.0f}; ratio {two / one:.2f} (goal > 1); machine CPU busy "
              f"{results[f'cpu_busy_pct_{load}_1_servers']:.0f}% with 1 server, "
              f"{results[f'cpu_busy_pct_{load}_2_servers']:.0f}% with 2 ({os.cpu_count()} cores)")
    print(f"DGL's set-up (2 machines, 1 server + 1 trainer each, both trainers at once): "
          f"sampling {results['two_trainers_seeds_s']:,.0f} seeds/s vs DGL 1.1.3 "
          f"{DGL_REFERENCE['sampling_seeds_s']:,} ({results['two_trainers_seeds_s'] / DGL_REFERENCE['sampling_seeds_s']:.2f}x, "
          f"aim >= 1.5x); pull of 10k random rows {results['two_trainers_pull_gbs']:.2f} GB/s vs "
          f"DGL {DGL_REFERENCE['pull_gbs']} ({results['two_trainers_pull_gbs'] / DGL_REFERENCE['pull_gbs']:.2f}x, aim "
          ">= 1.5x); DGL's figures are docs/reference.md's, not measured in this run")
    if args.json:
        print(json.dumps(results))
    return 0


def client_load_env(machine: int, out: Path, rows: int = 10_000, seconds: float = 8.0,
                    load: str = "pull") -> None:
    """Entry of the load-test client processes (env contract already set by the parent):
    requests to ``machine``'s servers for ``seconds``; writes rows/s (pull) or seeds/s
    (sample) to ``out``."""
    import runtime as dg
    from runtime.sampling.neighbor import sample_neighbors

    dg.initialize()
    g = dg.DistGraph("bench")
    own = g.get_partition_book().partid2nids(machine)
    rng = np.random.default_rng(os.getpid())
    feat = g.ndata["feat"]
    # The requests are drawn beforehand: drawing them is the load generator's work, not the
    # system's, and it would take CPU from the servers on a small machine.
    batches = [rng.choice(own, rows) if load == "pull" else rng.choice(own, 1000, replace=False)
               for _ in range(32)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        batch = batches[n % len(batches)]
        if load == "pull":
            feat[batch]
        else:
            sample_neighbors(g, batch, 25, seed=n)
        n += 1
    n *= rows if load == "pull" else 1000
    out.write_text(str(n / (time.perf_counter() - t0)))


if __name__ == "__main__":
    sys.exit(main())
