"""Row-wise optimizer updates for embedding tables, applied where the rows live (numpy only).

Servers run these on their shared memory when gradients arrive; a trainer runs them itself for
rows its own machine holds. Duplicate ids in one step are summed first.
"""

from __future__ import annotations

import numpy as np

from ..errors import DistError

KINDS = ("adagrad", "adam")


def _dedup(ids: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(ids, kind="stable")
    ids_s = ids[order]
    first = np.ones(len(ids_s), bool)
    first[1:] = ids_s[1:] != ids_s[:-1]
    uniq = ids_s[first]
    summed = np.zeros((len(uniq), *grads.shape[1:]), np.float32)
    np.add.at(summed, np.cumsum(first) - 1, grads[order])
    return uniq, summed


def apply_update(kind: str, weight: np.ndarray, states: list[np.ndarray], ids: np.ndarray,
                 grads: np.ndarray, params: dict) -> None:
    """Update ``weight[ids]`` in place from ``grads`` with the optimizer ``kind``."""
    if len(ids) == 0:
        return
    ids, g = _dedup(np.asarray(ids, np.int64), np.asarray(grads, np.float32))
    lr, eps = float(params["lr"]), float(params.get("eps", 1e-10))
    if kind == "adagrad":
        (acc,) = states
        acc_rows = acc[ids] + g * g
        acc[ids] = acc_rows
        weight[ids] -= lr * g / (np.sqrt(acc_rows) + eps)
    elif kind == "adam":
        m, v, step = states
        b1, b2 = float(params.get("beta1", 0.9)), float(params.get("beta2", 0.999))
        m_rows = b1 * m[ids] + (1 - b1) * g
        v_rows = b2 * v[ids] + (1 - b2) * g * g
        t = step[ids] + 1.0
        m[ids], v[ids], step[ids] = m_rows, v_rows, t
        mhat = m_rows / (1 - b1 ** t)
        vhat = v_rows / (1 - b2 ** t)
        weight[ids] -= lr * mhat / (np.sqrt(vhat) + eps)
    else:
        raise DistError(f"unknown sparse optimizer {kind!r}; known: {', '.join(KINDS)}")
