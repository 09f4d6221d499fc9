"""DGL's tests/distributed/test_dist_tensor.py, on this project's runtime.

Ported from dmlc/dgl tests/distributed/test_dist_tensor.py at v1.1.3 (commit
6e2c0f489ba4cfae4614d6f07da41e0ecd36b226). What changed, and why:

- ``dgl.distributed.X`` -> ``runtime.X``; ``F.*`` backend calls -> torch.
- The graph: DGL's ``create_random_graph(10000)`` (tests/compat/_dist_util.py), partitioned
  into one part by ``partitioner.partition_graph``; ``/tmp/dist_graph`` -> a pytest temp dir;
  ``DGL_DIST_MODE=standalone`` -> no launcher environment (the runtime's standalone mode).
- ``setup_module`` / ``teardown_module`` -> a module fixture (same steps, same order).
- Beyond DGL's ``|`` (its only operator), the same check runs for ``&``, ``^`` and the
  comparisons, which the runtime's DistTensor also has.
Nothing is left out.
"""

from __future__ import annotations

import operator

import pytest
import torch

import runtime
from partitioner import partition_graph
from tests.compat._dist_util import random_graph

pytestmark = pytest.mark.unit


def rand_mask(shape, dtype):
    return torch.randn(shape) > 0


@pytest.fixture(scope="module")
def dist_g(tmp_path_factory):
    g = random_graph(10000)
    out = tmp_path_factory.mktemp("dist_graph")
    graph_name = "dist_graph_test_3"
    partition_graph(g, graph_name, 1, out)
    runtime.exit_client()
    runtime.initialize("kv_ip_config.txt")
    dist_g = runtime.DistGraph(graph_name, part_config=str(out / f"{graph_name}.json"))
    dist_g.edata["mask1"] = runtime.DistTensor((dist_g.num_edges(),), torch.bool,
                                               init_func=rand_mask)
    dist_g.edata["mask2"] = runtime.DistTensor((dist_g.num_edges(),), torch.bool,
                                               init_func=rand_mask)
    yield dist_g
    runtime.exit_client()


def check_binary_op(dist_g, key1, key2, key3, op):
    for i in range(0, dist_g.num_edges(), 1000):
        i_end = min(i + 1000, dist_g.num_edges())
        assert torch.equal(
            dist_g.edata[key3][i:i_end],
            op(dist_g.edata[key1][i:i_end], dist_g.edata[key2][i:i_end]),
        )


def test_op(dist_g):
    dist_g.edata["mask3"] = dist_g.edata["mask1"] | dist_g.edata["mask2"]
    check_binary_op(dist_g, "mask1", "mask2", "mask3", operator.or_)


@pytest.mark.parametrize("op", [operator.and_, operator.xor, operator.eq, operator.ne,
                                operator.lt, operator.le, operator.gt, operator.ge])
def test_other_ops(dist_g, op):
    dist_g.edata["mask4"] = op(dist_g.edata["mask1"], dist_g.edata["mask2"])
    assert dist_g.edata["mask4"].dtype == torch.bool
    check_binary_op(dist_g, "mask1", "mask2", "mask4", op)
