"""The device a trainer trains on, and the DDP backend that goes with it.

The launcher gives each trainer its device (``DGLCTL_DEVICE``: ``cuda:LOCAL_RANK`` with
``--num-gpus`` / ``gpus_per_host``, else ``cpu``); a script asks for it with
``runtime.device()`` (or ``device("cuda")`` to insist on a GPU) and starts DDP with
``ddp_backend(dev)``: NCCL between GPU trainers, gloo between CPU ones.
"""

from __future__ import annotations

from typing import Any

import torch

from .context import get_context
from .env import local_rank
from .errors import DistError

SPECS = ("auto", "cpu", "cuda")


def device(spec: Any = "auto") -> torch.device:
    """This trainer's device.

    ``"auto"``: the launcher's choice (a GPU with ``--num-gpus``, else the CPU); standalone
    (no launcher), ``cuda:LOCAL_RANK`` when CUDA is available, else the CPU. ``"cuda"``: the
    launcher's GPU, else ``cuda:LOCAL_RANK`` (modulo the visible GPUs); a DistError without
    CUDA. ``"cpu"``, ``"cuda:N"`` or a ``torch.device``: that device.
    """
    if isinstance(spec, torch.device):
        return spec
    if spec not in SPECS:
        return torch.device(spec)
    if spec == "cpu":
        return torch.device("cpu")
    env = get_context().env
    given = torch.device(env.device) if env is not None else None
    if given is not None and given.type == "cuda" and not torch.cuda.is_available():
        raise DistError(f"the launcher gave this trainer {given} (gpus_per_host / "
                        "--num-gpus), but torch here sees no CUDA device (torch "
                        f"{torch.__version__}, CUDA build: {torch.version.cuda})",
                        hint="install a CUDA build of torch on the hosts, or launch "
                             "without --num-gpus")
    if spec == "auto" and env is not None:
        return given  # type: ignore[return-value]
    if given is not None and given.type == "cuda":
        return given
    if not torch.cuda.is_available():
        if spec == "auto":
            return torch.device("cpu")
        raise DistError("device 'cuda' was asked for, but torch sees no CUDA device "
                        f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})",
                        hint="run on a host with a GPU and a CUDA build of torch, or use cpu")
    return torch.device(f"cuda:{local_rank() % torch.cuda.device_count()}")


def ddp_backend(dev: Any = None) -> str:
    """The ``init_process_group`` backend for trainers on ``dev`` (default: ``device()``):
    ``nccl`` for GPUs each trainer has to itself, ``gloo`` otherwise (CPUs, or GPUs the
    launcher gave to several trainers: NCCL refuses two ranks on one device)."""
    dev = device() if dev is None else torch.device(dev)
    env = get_context().env
    shared = env is not None and env.shared_gpu
    return "nccl" if dev.type == "cuda" and not shared else "gloo"
