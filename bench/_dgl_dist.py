"""DGL 1.1.3's distributed mode on emulated loopback machines (run with the DGL venv's python).

    _dgl_dist.py partition GRAPH.npz ASSIGNMENT.npy OUT   # DGL's partition_graph, our parts
    _dgl_dist.py machine ID IP_CONFIG PART_CONFIG SCRIPT [ARGS...]
    _dgl_dist.py run SCRIPT [ARGS...]                     # (inside 'machine')

``partition`` runs DGL's own ``partition_graph`` (METIS method, 1 halo hop, CSC) with its METIS
call replaced by the given node -> part assignment, so DGL and dglctl serve the same parts.

``machine`` is one emulated machine: it must run in a mount namespace of its own with a
private /dev/shm (DGL names its shared memory after the graph only, so two machines' servers
on one host would collide); bench/dist_vs_dgl.py starts it under ``unshare --mount``. It
starts the machine's graph server and its trainer with the environment DGL's
``tools/launch.py`` gives them (server and client variables, torch.distributed's RANK,
WORLD_SIZE, MASTER_*), and waits for both. ``run`` is what both run: it makes DGL's
``get_local_machine_id`` see only this machine's address (every 127.0.0.x is local here, but
DGL lists interface addresses, and lo has only 127.0.0.1), then runs SCRIPT unchanged.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys

os.environ.setdefault("DGLBACKEND", "pytorch")  # else 'import dgl' writes ~/.dgl/config.json


def partition(npz: str, assignment: str, out: str) -> None:
    """DGL partitions of the .npz graph with the node -> part ``assignment``."""
    import dgl
    import dgl.distributed.partition as dgl_partition
    import numpy as np
    import torch

    with np.load(npz, allow_pickle=False) as archive:
        src = torch.from_numpy(archive["src"].astype(np.int64))
        dst = torch.from_numpy(archive["dst"].astype(np.int64))
        g = dgl.graph((src, dst), num_nodes=int(archive["num_nodes"]))
        for key in archive.files:
            if key.startswith("node:"):
                g.ndata[key[len("node:"):]] = torch.from_numpy(archive[key])
    parts = torch.from_numpy(np.load(assignment).astype(np.int64))
    num_parts = int(parts.max()) + 1

    def given_assignment(*_args, **_kwargs):
        return parts

    dgl_partition.metis_partition_assignment = given_assignment
    dgl.distributed.partition_graph(
        g, "bench", num_parts, out, num_hops=1, part_method="metis",
        balance_ntypes=g.ndata["train_mask"], balance_edges=True)


def machine(machine_id: int, ip_config: str, part_config: str, script_argv: list[str]) -> int:
    """One machine's server and trainer, DGL's launch environment; the worse exit code."""
    with open(ip_config) as fh:
        ips = [line.split()[0] for line in fh if line.strip()]
    hosts = len(ips)
    common = {"DGL_NUM_SAMPLER": "0", "DGL_NUM_CLIENT": str(hosts), "DGL_CONF_PATH": part_config,
              "DGL_IP_CONFIG": ip_config, "DGL_NUM_SERVER": "1", "DGL_GRAPH_FORMAT": "csc",
              "OMP_NUM_THREADS": "1", "BENCH_MACHINE_IP": ips[machine_id]}
    server_env = {**os.environ, **common, "DGL_ROLE": "server", "DGL_KEEP_ALIVE": "0",
                  "DGL_SERVER_ID": str(machine_id)}
    client_env = {**os.environ, **common, "DGL_DIST_MODE": "distributed", "DGL_ROLE": "client",
                  "DGL_GROUP_ID": "0", "RANK": str(machine_id), "LOCAL_RANK": "0",
                  "WORLD_SIZE": str(hosts), "MASTER_ADDR": ips[0],
                  "MASTER_PORT": os.environ["BENCH_MASTER_PORT"]}
    argv = [sys.executable, os.path.abspath(__file__), "run", *script_argv]
    server = subprocess.Popen(argv, env=server_env)
    try:
        trainer = subprocess.run(argv, env=client_env).returncode
    finally:
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return trainer or server.returncode


def run(script_argv: list[str]) -> None:
    """SCRIPT with DGL told which machine this is, as ``__main__``."""
    import dgl.distributed.rpc_client as rpc_client

    mine = os.environ["BENCH_MACHINE_IP"]
    rpc_client.local_ip4_addr_list = lambda: {mine}
    sys.argv = list(script_argv)
    runpy.run_path(script_argv[0], run_name="__main__")


def main() -> int:
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "partition":
        partition(*args)
        return 0
    if cmd == "machine":
        return machine(int(args[0]), args[1], args[2], args[3:])
    if cmd == "run":
        run(args)
        return 0
    raise SystemExit(f"unknown command {cmd!r}: partition, machine or run")


if __name__ == "__main__":
    sys.exit(main())
