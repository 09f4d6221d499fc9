"""Batches moved to the trainer's device: through pinned host memory, with non-blocking copies
on a side stream, waited for only when the trainer takes the batch.

A loader given ``device=`` copies each batch where it makes it: on its prefetch thread, the
copies of batch k+1 (its blocks, ids and the feature rows pulled ahead for it) run on the
side stream while the trainer's stream computes batch k; the trainer's stream waits for them
(an event, no host synchronisation) when the batch is handed over. Without prefetch the copy
is issued and waited for in the step.

How a device is driven is a ``DevicePlan``: ``CudaPlan`` for CUDA devices. Tests on a machine
without a GPU drive the same path with a plan of their own (``device=`` takes a plan).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from ..feature_cache import PulledRows


@runtime_checkable
class DevicePlan(Protocol):
    """How batches reach one device."""

    device: torch.device

    def pin(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in page-locked host memory (the source of an asynchronous copy)."""

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """Start copying pinned ``t`` to the device on the current (side) stream."""

    def side(self) -> AbstractContextManager[Any]:
        """The side stream, current within the ``with`` block."""

    def record(self) -> Any:
        """An event marking the copies issued so far on the side stream."""

    def wait(self, event: Any, tensors: list[torch.Tensor]) -> None:
        """Make the trainer's stream wait for ``event``; ``tensors`` (made on the side
        stream) are from now on used on the trainer's stream."""

    def keep(self, rows: np.ndarray) -> torch.Tensor:
        """``rows`` on the device for good (the feature cache's copies), whole when this
        returns: any stream may read them from then on."""


class CudaPlan:
    """A CUDA device: pinned copies on one side stream (made on first use, on the device)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._stream: Any = None

    @property
    def stream(self) -> Any:
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=self.device)
        return self._stream

    def pin(self, t: torch.Tensor) -> torch.Tensor:
        return t if t.is_pinned() else t.pin_memory()

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device, non_blocking=True)

    def side(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self.stream)

    def record(self) -> Any:
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def wait(self, event: Any, tensors: list[torch.Tensor]) -> None:
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in tensors:  # the caching allocator must not reuse them while the step runs
            t.record_stream(current)

    def keep(self, rows: np.ndarray) -> torch.Tensor:
        out = torch.from_numpy(np.ascontiguousarray(rows)).to(self.device)
        torch.cuda.current_stream(self.device).synchronize()  # once per fill: not per batch
        return out


def plan_for(device: Any) -> DevicePlan | None:
    """The plan of a loader's ``device=``: None for the CPU (batches stay as made), a
    ``CudaPlan`` for a CUDA device, the plan itself when one is given; a ValueError for a
    device the loaders cannot drive."""
    if device is None:
        return None
    if isinstance(device, DevicePlan):
        return device
    dev = torch.device(device)
    if dev.type == "cpu":
        return None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}: torch sees no CUDA device (CUDA build: "
                             f"{torch.version.cuda})")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        return CudaPlan(dev)
    raise ValueError(f"device={device!r}: the distributed loaders copy batches to CPU or "
                     "CUDA devices")


@dataclass
class Moved:
    """A batch whose copies to the device are issued: the device batch, the feature rows
    pulled ahead for it (on the device), the event that marks the copies, and every device
    tensor made."""

    batch: Any
    ready: dict[Any, torch.Tensor]
    event: Any
    tensors: list[torch.Tensor] = field(default_factory=list)


class DeviceCopier:
    """Copies batches to ``plan``'s device: :meth:`start` where the batch is made (the
    prefetch thread), :meth:`finish` where the trainer takes it. ``seconds``: the host time
    spent on copies so far (pinning, issuing, handing over; on CUDA the transfers themselves
    run on the side stream, not counted)."""

    def __init__(self, plan: DevicePlan) -> None:
        self.plan = plan
        self.device = plan.device
        # One counter per side: start runs on the prefetch thread, finish in the step.
        self._started = 0.0
        self._finished = 0.0

    @property
    def seconds(self) -> float:
        """Host seconds spent copying batches to the device, on any thread."""
        return self._started + self._finished

    def start(self, batch: Any, ready: dict[Any, np.ndarray | PulledRows]) -> Moved:
        """Issue the copies of ``batch`` and of its pulled-ahead rows ``ready`` (those found
        in copies kept on the device are put in there, after the rest's copy)."""
        began = time.perf_counter()
        plan, made = self.plan, []

        def move(t: torch.Tensor) -> torch.Tensor:
            out = plan.copy(plan.pin(t))
            made.append(out)
            return out

        with plan.side():
            moved = map_tensors(batch, move)
            rows = {k: _rows_on(v, move) for k, v in ready.items()}
            event = plan.record()
        self._started += time.perf_counter() - began
        return Moved(moved, rows, event, made)

    def finish(self, moved: Moved) -> tuple[Any, dict[Any, torch.Tensor]]:
        """The device batch and rows, once the trainer's stream waits for their copies."""
        began = time.perf_counter()
        self.plan.wait(moved.event, moved.tensors)
        self._finished += time.perf_counter() - began
        return moved.batch, moved.ready


def _rows_on(rows: np.ndarray | PulledRows,
             move: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Pulled rows on the device, on the current (side) stream: moved, and any hits from the
    device's copies put in after them."""
    if isinstance(rows, PulledRows):
        return rows.hits.place(move(torch.from_numpy(rows.host)))
    return move(torch.from_numpy(np.ascontiguousarray(rows)))


def map_tensors(x: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``x`` with ``fn`` applied to every tensor in it: tensors, blocks and sampled graphs
    (``.to``-able objects with ``map_tensors``), and tuples, lists and dicts of them; other
    values are kept."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if hasattr(x, "map_tensors"):
        return x.map_tensors(fn)
    if isinstance(x, tuple):
        return tuple(map_tensors(v, fn) for v in x)
    if isinstance(x, list):
        return [map_tensors(v, fn) for v in x]
    if isinstance(x, dict):
        return {k: map_tensors(v, fn) for k, v in x.items()}
    return x
