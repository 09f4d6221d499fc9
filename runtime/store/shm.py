"""Shared memory of one job on one machine: .npy files under /dev/shm, named by job id.

The main server copies its partition here once; backup servers, trainers and samplers on the
same host map the same files (zero copy). Every name carries the job id and machine id, so two
jobs, or two emulated machines on one host, never collide; cleanup removes only this job's
files. Every file is its owner's only (0600): the job's graph is nobody else's to read.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..env import DEFAULT_SHM_DIR
from ..errors import ShmError

# The default; a job's processes take theirs from the env contract (``RuntimeEnv.shm_dir``).
SHM_DIR = Path(DEFAULT_SHM_DIR)
_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _encode(name: str) -> str:
    # Tensor names hold '/' and ':' (e.g. "_N/feat"); keep file names flat and reversible.
    return "".join(c if c in _SAFE else f"%{ord(c):02x}" for c in name)


class ShmArena:
    """The shared arrays of job ``job_id`` on machine ``machine_id``."""

    def __init__(self, job_id: str, machine_id: int, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else SHM_DIR
        self.prefix = f"dglctl.{job_id}.m{machine_id}."
        self.job_id = job_id
        self.machine_id = machine_id

    def path(self, name: str) -> Path:
        return self.root / f"{self.prefix}{_encode(name)}.npy"

    def create(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A new zero-filled shared array (writable); replaces one of the same name.

        Its memory is reserved at once: a tmpfs hands out pages only when they are first
        written, so a shared memory too small for the array (Docker's default /dev/shm is
        64 MB) would otherwise kill the process with SIGBUS in the middle of the copy. Here
        it is a ShmError saying how much is needed and how much is free."""
        path = self.path(name)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        try:
            # numpy would create the file 0666 less the umask: made private first, numpy
            # only truncates and fills it (the file keeps its mode).
            os.close(_create_private(tmp))
            arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.dtype(dtype),
                                            shape=tuple(shape))
            _reserve(tmp)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self._no_space(e, name, np.dtype(dtype).itemsize * math.prod(shape)) from None
        os.replace(tmp, path)
        return arr

    def _no_space(self, e: OSError, name: str, nbytes: int) -> OSError | ShmError:
        """The ShmError for a full shared memory (``e`` itself for any other failure)."""
        if e.errno not in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            return e
        free = shutil.disk_usage(self.root).free
        return ShmError(
            f"not enough shared memory for {name!r} of job {self.job_id} machine "
            f"{self.machine_id}: {nbytes:,} bytes needed, {free:,} free in {self.root} "
            f"({e.strerror})",
            hint="give the host more shared memory (Docker: --shm-size; Kubernetes: an "
                 "emptyDir volume with medium Memory on /dev/shm), or point DGLCTL_SHM_DIR "
                 "at a larger tmpfs",
        )

    def put(self, name: str, data: np.ndarray) -> np.ndarray:
        """A new shared array holding a copy of ``data``.

        When ``data`` maps a whole ``.npy`` file (a shard as ``np.load(mmap_mode=...)`` opens
        it) the file is copied by the kernel (``sendfile``): no page of it is mapped into this
        process, and the copy runs at the page cache's speed (200M-edge part, 4.5 GB: see
        docs/benchmarks.md, "Runtime at 200M edges").
        """
        source = whole_npy_file(data)
        if source is not None:
            return self._put_file(name, source, data.nbytes)
        arr = self.create(name, data.shape, data.dtype)
        if data.size:
            arr[...] = data
        return arr

    def _put_file(self, name: str, source: str, nbytes: int) -> np.ndarray:
        path = self.path(name)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        try:
            fd = _create_private(tmp)
            try:
                with open(source, "rb") as src:
                    size = os.fstat(src.fileno()).st_size
                    os.posix_fallocate(fd, 0, size)  # ENOSPC now, never SIGBUS later
                    done = 0
                    while done < size:
                        sent = os.sendfile(fd, src.fileno(), done, size - done)
                        if sent == 0:
                            raise OSError(errno.EIO, f"{source} ended early")
                        done += sent
            finally:
                os.close(fd)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self._no_space(e, name, nbytes) from None
        os.replace(tmp, path)
        return self.attach(name)

    def attach(self, name: str, *, writable: bool = True) -> np.ndarray:
        """Map an existing shared array; raises ShmError naming the file if it is missing."""
        path = self.path(name)
        try:
            return np.load(path, mmap_mode="r+" if writable else "r", allow_pickle=False)
        except FileNotFoundError:
            raise ShmError(
                f"shared array {name!r} of job {self.job_id} machine {self.machine_id} is "
                f"missing ({path})",
                hint="the main server of this machine has not loaded it, or has exited",
            ) from None

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def publish(self, manifest: dict[str, Any]) -> None:
        """Atomically write the manifest that tells other processes the arrays are ready."""
        path = self.root / f"{self.prefix}manifest.json"
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        with os.fdopen(_create_private(tmp), "w") as f:
            f.write(json.dumps(manifest))
        os.replace(tmp, path)

    def wait_manifest(self, timeout: float) -> dict[str, Any]:
        """Wait for the main server's manifest; ShmError after ``timeout`` seconds."""
        path = self.root / f"{self.prefix}manifest.json"
        deadline = time.monotonic() + timeout
        while True:
            try:
                return json.loads(path.read_text())
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    raise ShmError(
                        f"machine {self.machine_id} of job {self.job_id}: the main server did "
                        f"not publish its shared memory within {timeout:.0f}s ({path})"
                    ) from None
                time.sleep(0.05)

    def files(self) -> list[Path]:
        return sorted(self.root.glob(self.prefix + "*"))

    def cleanup(self) -> int:
        """Remove every shared file of this job and machine; returns how many were removed."""
        n = 0
        for p in self.files():
            p.unlink(missing_ok=True)
            n += 1
        return n


def whole_npy_file(data: np.ndarray) -> str | None:
    """The path of the ``.npy`` file ``data`` maps as a whole, exactly as its header describes
    it (a shard opened with ``np.load(mmap_mode=...)``), or None (a slice, a view, memory)."""
    if not isinstance(data, np.memmap) or not data.filename or not data.flags.c_contiguous:
        return None
    try:
        with open(data.filename, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read(f)
            header = f.tell()
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None
    whole = (not fortran and tuple(shape) == data.shape and dtype == data.dtype
             and data.offset == header and header + data.nbytes == size)
    return str(data.filename) if whole else None


def _create_private(path: Path) -> int:
    """A new empty file readable and writable by its owner only (0600, whatever the umask),
    open for writing: another user's processes must not read the job's data, nor write it."""
    path.unlink(missing_ok=True)  # a leftover of a dead process that had this pid
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)  # exactly 0600: a umask such as 0o277 takes the owner's bits too
    return fd


def _reserve(path: Path) -> None:
    """Allocate every block of ``path`` now (ENOSPC as an OSError if they do not fit)."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


def sampler_dir_prefix(job_id: str | None) -> str:
    """Name prefix of a trainer's sampler socket folder in the temp dir. It carries the job id
    so that 'dglctl stop' can remove the folders of trainers it had to kill."""
    return f"dglctl-samplers-{job_id}-" if job_id else "dglctl-samplers-"


def sampler_dirs(job_id: str) -> list[Path]:
    """The sampler socket folders of a job's trainers on this host."""
    return sorted(Path(tempfile.gettempdir()).glob(sampler_dir_prefix(job_id) + "*"))


def job_files(job_id: str, root: Path | None = None,
              machine_id: int | None = None) -> list[Path]:
    """Every shared-memory file of a job on this host (of every machine, or of one)."""
    pattern = f"dglctl.{job_id}.m*" if machine_id is None else f"dglctl.{job_id}.m{machine_id}.*"
    return sorted((Path(root) if root else SHM_DIR).glob(pattern))
