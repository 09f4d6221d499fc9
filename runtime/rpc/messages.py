"""Every message between runtime processes: one dataclass per operation, and its reply.

A message's plain fields travel in the msgpack header; its array fields (``array()``: one
array, ``arrays()``: a list of them) travel as raw frames in field order, so no code reads an
array by its position in a frame list, and no header dict is built by hand. The receiver
gets the same class back (``decode``) and dispatches on its type, as DGL's request classes
with their ``process_request``, without pickle: only registered classes can be made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast, dataclass_transform

import numpy as np

from partitioner.errors import PartitionerError

from ..errors import DistError, ProtocolError
from .wire import pack, unpack

_EMPTY = np.empty(0, np.int64)
_REGISTRY: dict[str, type[Message]] = {}
# The per-message layout: (header fields, single-array fields, array-list fields).
_LAYOUT: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}

M = TypeVar("M", bound="Message")


def array() -> Any:
    """A field holding one numpy array (one raw frame)."""
    return field(default_factory=lambda: _EMPTY, metadata={"slot": "one"})


def arrays() -> Any:
    """A field holding a list of numpy arrays (one raw frame each)."""
    return field(default_factory=list, metadata={"slot": "many"})


class Message:
    """Base of every message; subclasses are made with :func:`message`."""

    op: ClassVar[str] = ""


@dataclass_transform(field_specifiers=(field,))
def message(op: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: a dataclass registered under ``op`` (the name on the wire)."""
    def wrap(cls: type[M]) -> type[M]:
        cls = dataclass(cls)
        cls.op = op
        if op in _REGISTRY:
            raise TypeError(f"message op {op!r} registered twice")
        _REGISTRY[op] = cls
        head: list[str] = []
        one: list[str] = []
        many: list[str] = []
        for f in dataclasses.fields(cast(Any, cls)):
            {"one": one, "many": many}.get(f.metadata.get("slot", ""), head).append(f.name)
        _LAYOUT[cls] = (tuple(head), tuple(one), tuple(many))
        return cls
    return wrap


# Header keys that are not a message's fields: the request id travels beside the message.
ENVELOPE = ("id",)


def encode(msg: Message, **envelope: Any) -> list[Any]:
    """Frames of ``msg``; ``envelope`` (e.g. the request id) travels in the header too."""
    head, one, many = _LAYOUT[type(msg)]
    header = {name: getattr(msg, name) for name in head}
    header["op"] = msg.op
    header.update(envelope)
    frames = [getattr(msg, name) for name in one]
    if many:
        counts = []
        for name in many:
            items = getattr(msg, name)
            counts.append(len(items))
            frames.extend(items)
        header["_n"] = counts
    return pack(header, frames, owned=True)


def decode(frames: list[Any]) -> tuple[Message, dict[str, Any]]:
    """``(message, envelope)`` from frames made by :func:`encode`."""
    # What is left of the header once op, envelope and array counts are out are the fields:
    # the class's constructor refuses any other key and any missing one.
    values, frames_in = unpack(frames)
    op = values.pop("op", None)
    cls = _REGISTRY.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message {op!r}")
    envelope = {k: values.pop(k) for k in ENVELOPE if k in values}
    _, one, many = _LAYOUT[cls]
    counts = values.pop("_n", None) if many else None
    expected = len(one) + (sum(counts) if counts else 0)
    if len(frames_in) != expected:
        raise ProtocolError(f"{op!r} carries {len(frames_in)} arrays, expected {expected}")
    if one:
        values.update(zip(one, frames_in, strict=False))
    if counts:
        pos = len(one)
        for name, n in zip(many, counts, strict=True):
            values[name] = frames_in[pos:pos + n]
            pos += n
    try:
        return cls(**values), envelope
    except TypeError as e:
        raise ProtocolError(f"malformed {op!r} message: {e}") from None


# --- replies shared by many requests ----------------------------------------------------------
@message("ack")
class Ack(Message):
    """The request was done; nothing to return."""


@message("error")
class ErrorReply(Message):
    """The request failed: the error's class name, message and hint (raised as that class)."""

    type: str
    message: str
    hint: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> ErrorReply:
        if isinstance(exc, DistError | PartitionerError):
            return cls(type(exc).__name__, exc.message, exc.hint)
        return cls(type(exc).__name__, f"{type(exc).__name__}: {exc}", None)


# --- session -----------------------------------------------------------------------------------
@message("hello")
class Hello(Message):
    """First message of every connection: proves it belongs to the job."""

    token: str
    version: int
    runtime: str
    client: str = "client"
    keeps_server: bool = True  # False for the launcher's probes: they do not hold the job
    role: str = "client"  # "trainer" / "sampler" (of the env contract), else any other client
    attempt: int = 0  # the job's attempt the client belongs to (TORCHELASTIC_RESTART_COUNT)


@message("hello_reply")
class HelloReply(Message):
    """The server's name for itself: machine, server id, job, runtime version."""

    machine_id: int
    server_id: int
    job_id: str
    runtime: str


@message("ping")
class Ping(Message):
    """Keeps a long wait (a barrier) alive while the server answers."""


@message("barrier")
class Barrier(Message):
    """Answered once ``count`` callers have sent a barrier of the same ``name``."""

    name: str
    count: int


@message("stats")
class Stats(Message):
    """The server's counters."""


@message("stats_reply")
class StatsReply(Message):
    """A server's counters: requests, bytes in and out, errors, uptime, clients, tensors;
    and the feature-cache counters its machine's trainers last reported (``CacheReport``),
    by trainer rank (a string: a map key on the wire)."""

    requests: int
    bytes_in: int
    bytes_out: int
    errors: int
    uptime: float
    clients: int  # connections open now (trainers, samplers, and the client asking)
    machine_id: int
    server_id: int
    tensors: list[str]
    caches: dict[str, dict[str, list[int]]] = field(default_factory=dict)


@message("cache_report")
class CacheReport(Message):
    """A trainer's feature-cache counters, for ``dglctl status``: per tensor,
    ``[lookups, hits, rows kept]`` (``runtime.feature_cache``)."""

    rank: int
    tensors: dict[str, list[int]]


@message("shutdown")
class Shutdown(Message):
    """Ask the server to exit."""


# --- tensors -----------------------------------------------------------------------------------
@message("pull")
class Pull(Message):
    """Rows ``ids`` (local to the machine) of tensor ``name``. With ``stream`` > 0 the reply
    comes as ``PullPiece``s of about that many bytes each."""

    name: str
    stream: int = 0
    ids: np.ndarray = array()


@message("pull_reply")
class PullReply(Message):
    """The rows of a ``Pull``, in the order asked."""

    rows: np.ndarray = array()


@message("pull_piece")
class PullPiece(Message):
    """Rows ``row0 ..`` of a streamed pull reply, piece ``chunk`` of ``chunks``."""

    chunk: int
    chunks: int
    row0: int
    rows: np.ndarray = array()


@message("push")
class Push(Message):
    """Write (``set``) or accumulate (``add``) ``rows`` into rows ``ids`` of ``name``."""

    name: str
    mode: str = "set"
    ids: np.ndarray = array()
    rows: np.ndarray = array()


@message("create")
class Create(Message):
    """Create a machine's rows of a tensor (idempotent with ``exist_ok``)."""

    name: str
    shape: list[int]
    dtype: str
    policy: str
    exist_ok: bool = False
    # Lives as long as the job; else the attempt that created it frees it (or its end does).
    persistent: bool = False


@message("create_reply")
class CreateReply(Message):
    """Whether this call created the tensor (exactly one caller per machine fills it)."""

    created: bool


@message("delete")
class Delete(Message):
    """Remove a machine's rows of tensor ``name``."""

    name: str


# --- graph structure ---------------------------------------------------------------------------
@message("degrees")
class Degrees(Message):
    """In-degrees (``edge_dir`` "in") or out-degrees of local node ids of ``etype``."""

    etype: str
    edge_dir: str = "in"
    ids: np.ndarray = array()


@message("degrees_reply")
class DegreesReply(Message):
    """One degree per id of a ``Degrees`` request."""

    degrees: np.ndarray = array()


@message("find_edges")
class FindEdges(Message):
    """Homogeneous end points of local edge ids of ``etype``."""

    etype: str
    ids: np.ndarray = array()


@message("find_edges_reply")
class FindEdgesReply(Message):
    """Homogeneous source and destination node ids, one per edge id."""

    src: np.ndarray = array()
    dst: np.ndarray = array()


@message("sample")
class Sample(Message):
    """Neighbour sampling of local seeds for several edge types at once (one entry per edge
    type in every list; see ``LocalPartition.sample`` for the meaning of each array)."""

    etypes: list[str]
    salts: list[int]
    fanouts: list[int]
    replace: bool
    seed: int
    prob: str | None = None
    edge_dir: str = "in"
    seeds: list[np.ndarray] = arrays()
    excluded: list[np.ndarray] = arrays()


@message("sample_reply")
class SampleReply(Message):
    """Per edge type: seed index, neighbour id, edge id (or CSC position) of each edge."""

    seed_idx: list[np.ndarray] = arrays()
    nbrs: list[np.ndarray] = arrays()
    eids: list[np.ndarray] = arrays()


# --- DistTensor and sparse optimizer semantics (DGL's) ----------------------------------------
@message("sparse_step")
class SparseStep(Message):
    """One trainer's share of collective optimizer step ``step`` for a machine's rows:
    answered once ``count`` trainers have sent theirs and the machine has applied them all,
    each row once, from the mean of its gradients (DGL's ``SparseAdagrad``/``SparseAdam``)."""

    step: str
    count: int
    kind: str
    weight: str
    states: list[str]
    params: dict[str, Any]
    ids: np.ndarray = array()
    grads: np.ndarray = array()


@message("write_counts")
class WriteCountsQuery(Message):
    """How many times the machine's rows of each of tensors ``names`` have been written
    (``runtime.store.write_counts``)."""

    names: list[str]


@message("write_counts_reply")
class WriteCountsReply(Message):
    """The counts of a ``WriteCountsQuery``, in its order (-1: the machine keeps none)."""

    counts: list[int]


@message("count_nonzero")
class CountNonzero(Message):
    """How many values of a machine's rows of tensor ``name`` are not zero."""

    name: str


@message("count_nonzero_reply")
class CountNonzeroReply(Message):
    """The count of a ``CountNonzero``."""

    count: int
