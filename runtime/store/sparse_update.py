"""Row-wise optimizer updates for embedding tables, applied where the rows live (numpy only).

A machine's main server runs these on its shared memory once every trainer's gradients of a
step have arrived (standalone mode: the trainer itself). As DGL's ``SparseAdagrad.update`` /
``SparseAdam.update``: the update is not linear, so each row is updated once per step, from
the mean of all the gradients of that row (every trainer's, every lookup's).
"""

from __future__ import annotations

import numpy as np

from ..errors import DistError

KINDS = ("adagrad", "adam")


def _mean_by_row(ids: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique ``ids`` and, for each, the mean of its gradients (DGL: ``index_add_`` of the
    gradients, divided by the count of each id)."""
    uniq, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    summed = np.zeros((len(uniq), *grads.shape[1:]), np.float32)
    np.add.at(summed, inverse.reshape(-1), grads)
    return uniq, summed / counts.reshape(-1, *([1] * (grads.ndim - 1))).astype(np.float32)


def apply_update(kind: str, weight: np.ndarray, states: list[np.ndarray], ids: np.ndarray,
                 grads: np.ndarray, params: dict) -> None:
    """Update ``weight[ids]`` in place from ``grads`` with the optimizer ``kind``.

    States in DGL's order: Adagrad ``[sum]`` (sum of squared gradients, one per value); Adam
    ``[step, mem, power]`` (step count per row, first and second moments per value).
    """
    if len(ids) == 0:
        return
    ids, g = _mean_by_row(np.asarray(ids, np.int64), np.asarray(grads, np.float32))
    lr, eps = float(params["lr"]), float(params.get("eps", 1e-10))
    if kind == "adagrad":
        (acc,) = states
        acc_rows = acc[ids] + g * g
        acc[ids] = acc_rows
        weight[ids] -= lr * g / (np.sqrt(acc_rows) + eps)
    elif kind == "adam":
        step, m, v = states
        b1, b2 = float(params.get("beta1", 0.9)), float(params.get("beta2", 0.999))
        t = step[ids] + 1.0
        step[ids] = t
        m_rows = b1 * m[ids] + (1 - b1) * g
        v_rows = b2 * v[ids] + (1 - b2) * g * g
        m[ids], v[ids] = m_rows, v_rows
        t = t.reshape(len(ids), *([1] * (g.ndim - 1)))
        mhat = m_rows / (1 - b1 ** t)
        vhat = v_rows / (1 - b2 ** t)
        weight[ids] -= lr * mhat / (np.sqrt(vhat) + eps)
    else:
        raise DistError(f"unknown sparse optimizer {kind!r}; known: {', '.join(KINDS)}")
