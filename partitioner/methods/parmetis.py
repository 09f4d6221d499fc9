"""``ParMETIS_V3_PartKway`` through ctypes, called by every MPI rank (mpi4py) on its block of
the symmetric graph: the distributed partitioner's backend.

The library is picked when first needed, by what is installed and by id width: ParMETIS
itself (``libparmetis.so``, ids of ``IDXTYPEWIDTH`` bits as its ``metis.h`` says, 32 without
one), else PT-Scotch's ParMETIS-compatible library (Debian's ``libptscotch-dev``:
``libptscotchparmetisv3.so``, 64-bit ids under ``scotch-int64/``, the default's width from
its ``scotch.h``). ``DGLCTL_PARMETIS_LIB`` (a path) and ``DGLCTL_PARMETIS_IDX_BITS`` name one
explicitly (32 bits unless told). ParMETIS balances every weight column; PT-Scotch's library balances one (it
ignores ``ncon`` and ``ubvec``), so it gets the first column and the caller reports the
balance achieved on the others.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendUnavailable, PartitionerError, PartitionOptionError

METIS_OK = 1
_MULTIARCH = Path("/usr/lib") / f"{platform.machine()}-linux-gnu"  # Debian's library folder


@dataclass(frozen=True)
class ParMetisLibrary:
    """A loaded ParMETIS-compatible library: where, which, and the width of its ids."""

    path: str
    flavour: str  # "parmetis" or "ptscotch"
    idx_bits: int  # 32 or 64
    dll: Any

    @property
    def balances_all(self) -> bool:
        """Whether every weight column is balanced (ParMETIS), or the first only (PT-Scotch)."""
        return self.flavour == "parmetis"

    @property
    def idx(self) -> type[np.signedinteger]:
        """The numpy dtype of the library's ids."""
        return np.int64 if self.idx_bits == 64 else np.int32


def _header_bits(header: Path, pattern: str) -> int | None:
    """The id width a C header declares (``pattern`` captures a width or a C type)."""
    try:
        m = re.search(pattern, header.read_text(errors="replace"))
    except OSError:
        return None
    if m is None:
        return None
    word = m.group(1)
    return {"int": 32, "int32_t": 32, "int64_t": 64, "long": 64}.get(word) or (
        int(word) if word.isdigit() else None)


def _candidates() -> list[tuple[str, str, int | None]]:
    """``(path, flavour, id bits or None: unknown)`` in the order they are tried."""
    explicit = os.environ.get("DGLCTL_PARMETIS_LIB")
    if explicit:
        width = os.environ.get("DGLCTL_PARMETIS_IDX_BITS", "32")  # ParMETIS's default width
        if width not in ("32", "64"):
            raise PartitionOptionError(f"DGLCTL_PARMETIS_IDX_BITS={width!r}: must be 32 or 64")
        flavour = "ptscotch" if "scotch" in Path(explicit).name else "parmetis"
        return [(explicit, flavour, int(width))]
    found: list[tuple[str, str, int | None]] = []
    parmetis = ctypes.util.find_library("parmetis")
    if parmetis:
        bits = _header_bits(Path("/usr/include/metis.h"),
                            r"#define\s+IDXTYPEWIDTH\s+(\d+)") or 32
        found.append((parmetis, "parmetis", bits))
    for sub, bits in (("scotch-int64", 64), ("scotch-long", 64)):
        lib = _MULTIARCH / sub / "libptscotchparmetisv3.so"
        if lib.exists():
            found.append((str(lib), "ptscotch", bits))
    default = ctypes.util.find_library("ptscotchparmetisv3")
    if default:
        num = _header_bits(Path("/usr/include/scotch/scotch.h"),
                           r"typedef\s+(\w+)\s+SCOTCH_Num;")
        found.append((default, "ptscotch", num or 32))
    return found


_loaded: dict[int, ParMetisLibrary] = {}


def _preload_siblings(folder: Path) -> None:
    """Load PT-Scotch's own libraries from the shim's folder first: the shim names them by
    soname only, which the loader would otherwise resolve to the default (32-bit) build's,
    whatever the shim's width (a 64-bit shim on 32-bit Scotch fails with 'communication
    error'). Already loaded sonames are reused, so these win."""
    for name in ("libscotcherr.so", "libscotch.so", "libptscotcherr.so", "libptscotch.so"):
        lib = folder / name
        if lib.exists():
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)


def load_library(min_bits: int = 32) -> ParMetisLibrary:
    """The first library found whose ids have at least ``min_bits`` bits (loaded once).

    Raises:
        BackendUnavailable: none is installed, or none is wide enough (says how to install).
    """
    if min_bits in _loaded:
        return _loaded[min_bits]
    tried = []
    for path, flavour, bits in _candidates():
        if bits is None or bits < min_bits:
            tried.append(f"{path} ({bits or '?'}-bit ids)")
            continue
        try:
            if flavour == "ptscotch":
                _preload_siblings(Path(path).parent)
            dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        if not hasattr(dll, "ParMETIS_V3_PartKway"):
            tried.append(f"{path} (no ParMETIS_V3_PartKway)")
            continue
        lib = ParMetisLibrary(path, flavour, bits, dll)
        _loaded[min_bits] = lib
        return lib
    raise BackendUnavailable(
        f"no ParMETIS-compatible library with {min_bits}-bit ids"
        + (f"; tried {', '.join(tried)}" if tried else " is installed"),
        hint="install PT-Scotch's (Debian: apt-get install libptscotch-dev) or ParMETIS (Debian "
             "non-free: libparmetis-dev), or set DGLCTL_PARMETIS_LIB to its .so")


@dataclass(frozen=True)
class KwayResult:
    """This rank's nodes' parts, the edge cut the library reports, and the library used."""

    part: np.ndarray
    edgecut: int
    library: ParMetisLibrary


def part_kway(comm: Any, vtxdist: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
              num_parts: int, *, vweights: np.ndarray | None = None,
              imbalance: float = 1.05, library: ParMetisLibrary | None = None) -> KwayResult:
    """Partition the symmetric graph whose nodes ``vtxdist[r]:vtxdist[r+1]`` rank ``r`` holds
    (``xadj``, ``adjncy``: its rows, global ids, no self-loops) into ``num_parts``; every rank
    of ``comm`` (an mpi4py communicator) calls it at once.

    ``vweights`` is ``(local nodes, ncon)``: ParMETIS balances each column within
    ``imbalance``; PT-Scotch's library the first only.

    Raises:
        PartitionOptionError: arrays that do not fit each other.
        BackendUnavailable: no library (see :func:`load_library`).
        PartitionerError: the library failed.
    """
    from mpi4py import MPI

    rank = comm.Get_rank()
    n_local = int(vtxdist[rank + 1] - vtxdist[rank])
    if len(vtxdist) != comm.Get_size() + 1 or len(xadj) != n_local + 1:
        raise PartitionOptionError(
            f"rank {rank}: vtxdist has {len(vtxdist)} entries for {comm.Get_size()} ranks, "
            f"xadj {len(xadj)} for {n_local} nodes")
    lib = library or load_library(64 if int(vtxdist[-1]) > 2**31 - 1
                                  or int(comm.allreduce(len(adjncy), op=MPI.SUM)) > 2**31 - 1
                                  else 32)
    idx = lib.idx
    ncon = 1
    weights = None
    if vweights is not None:
        w = np.asarray(vweights).reshape(n_local, -1)
        if not lib.balances_all:
            w = w[:, :1]
        ncon = w.shape[1]
        weights = np.ascontiguousarray(w, dtype=idx).reshape(-1)
    arrays = [np.ascontiguousarray(a, dtype=idx) for a in (vtxdist, xadj, adjncy)]
    part = np.zeros(max(n_local, 1), dtype=idx)
    tpwgts = np.full(ncon * num_parts, 1.0 / num_parts, dtype=np.float32)
    ubvec = np.full(ncon, imbalance, dtype=np.float32)
    options = np.zeros(3, dtype=idx)  # options[0] = 0: the defaults
    c_idx = ctypes.c_int64 if lib.idx_bits == 64 else ctypes.c_int32

    def ptr(a: np.ndarray | None) -> Any:
        return None if a is None else a.ctypes.data_as(ctypes.c_void_p)

    edgecut = c_idx(0)
    handle = ctypes.c_void_p(MPI._addressof(comm))  # MPI_Comm *: the address of the handle
    status = lib.dll.ParMETIS_V3_PartKway(
        ptr(arrays[0]), ptr(arrays[1]), ptr(arrays[2]), ptr(weights), None,
        ctypes.byref(c_idx(2 if weights is not None else 0)), ctypes.byref(c_idx(0)),
        ctypes.byref(c_idx(ncon)), ctypes.byref(c_idx(num_parts)), ptr(tpwgts), ptr(ubvec),
        ptr(options), ctypes.byref(edgecut), ptr(part), handle)
    if status != METIS_OK:
        raise PartitionerError(f"rank {rank}: {lib.flavour} ParMETIS_V3_PartKway failed "
                               f"(status {status}) on {n_local:,} nodes in {num_parts} parts")
    return KwayResult(part[:n_local].astype(np.int64), int(edgecut.value), lib)
