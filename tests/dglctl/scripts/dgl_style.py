"""A trainer written for DGL's launch.py: its own --ip_config and --part_config (files of the
machine it was written on), torchrun's environment; argv: DGL-style options, then a mode:
env (print the environment) | crash (an uncaught exception on rank 1)."""

import argparse
import json
import os

import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--ip_config", default="ip_config_of_my_laptop.txt")
parser.add_argument("--part_config", default="data/of/my/laptop.json")
parser.add_argument("--graph_name", default="g")
parser.add_argument("mode", choices=["env", "crash"])
args = parser.parse_args()
runtime.initialize(args.ip_config)
g = runtime.DistGraph(args.graph_name, part_config=args.part_config)
rank = int(os.environ["RANK"])
if args.mode == "crash" and rank == 1:
    raise ValueError(f"rank {rank} found a bad batch")
names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
         "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS",
         "TORCHELASTIC_ERROR_FILE", "GLOO_SOCKET_IFNAME", "DGLCTL_PREFETCH"]
print("ENV " + json.dumps({n: os.environ.get(n) for n in names} | {"nodes": g.num_nodes()}),
      flush=True)
