"""GNN layers on message-flow blocks in plain torch (DGL's names): SAGE, GAT, PyG bridge."""

from runtime.nn.gat import GATConv, edge_softmax
from runtime.nn.pyg import HeteroConv, relation_block, to_pyg
from runtime.nn.sage import SAGE, SAGEConv

__all__ = [
    "SAGEConv",
    "SAGE",
    "GATConv",
    "edge_softmax",
    "to_pyg",
    "HeteroConv",
    "relation_block",
]
