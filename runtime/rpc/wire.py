"""Message framing on the wire: a msgpack header, then each tensor as one raw frame.

No pickle, ever: headers are msgpack maps of plain values, tensors travel as their bytes with
dtype and shape in the header, and are read back with ``np.frombuffer`` without a copy.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from ..errors import DistError

PROTOCOL_VERSION = 4  # 3: typed messages (runtime.rpc.messages), errors as {type, message, hint}
# 4: Hello names its attempt, Create whether the tensor is persistent (state per attempt)


def pack(header: dict[str, Any], arrays: list[np.ndarray] | tuple[np.ndarray, ...] = (),
         owned: bool = False) -> list:
    """Frames for ``header`` and ``arrays`` (zero-copy for contiguous arrays); ``owned``: the
    caller's ``header`` may be changed (saves a copy)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if not owned:
        header = dict(header)
    header["_t"] = [[a.dtype.str, list(a.shape)] for a in arrays]
    # Flat views (no copy): memoryview cannot cast an empty array of several dimensions.
    return [msgpack.packb(header, use_bin_type=True),
            # (numpy's stubs declare no buffer protocol before Python 3.12's Buffer)
            *[memoryview(a.reshape(-1)).cast("B") for a in arrays]]  # type: ignore[arg-type]


def unpack(frames: list) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Inverse of :func:`pack`; arrays are read-only views of the received frames."""
    if not frames:
        raise DistError("empty message")
    first = frames[0]
    header = msgpack.unpackb(first.buffer if hasattr(first, "buffer") else first, raw=False)
    specs = header.pop("_t", [])
    if len(specs) != len(frames) - 1:
        raise DistError(f"message declares {len(specs)} tensors but carries {len(frames) - 1}")
    arrays = []
    for (dtype, shape), frame in zip(specs, frames[1:], strict=True):
        buf = frame.buffer if hasattr(frame, "buffer") else frame
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise DistError(f"refusing object dtype {dtype!r} on the wire")
        arrays.append(np.frombuffer(buf, dtype=dt).reshape(shape))
    return header, arrays
