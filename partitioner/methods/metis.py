"""k-way METIS (METIS_PartGraphKway) with several balance constraints, on numpy buffers."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType

import numpy as np

from ..errors import BackendUnavailable, PartitionerError, PartitionOptionError
from .checks import check_csr, check_vweights

_INSTALL_HINT = (
    "install libmetis: `pip install cmeel-metis` (or `apt-get install libmetis5`), or set "
    "METIS_DLL to the full path of a 32-bit-id libmetis.so"
)

# Position of METIS_OPTION_SEED in the options array. METIS 5.2 inserted NIPARTS (and ONDISK,
# DROPEDGES) into the option enum, so 5.1 (Debian's libmetis5, and the `metis` wrapper's own
# METIS_Options names) has SEED at 8 while 5.2 has it at 9, where 5.1 keeps NO2HOP; index 8 is
# NCUTS in 5.2, and a seed of 0 written there fails with "Incorrect ncuts". OBJTYPE is index 1
# in both. 5.2.1 is told apart by a function it added, METIS_CacheFriendlyReordering.
_SEED_INDEX_51 = 8
_SEED_INDEX_52 = 9

_load_lock = threading.Lock()
_metis: ModuleType | None = None
_seed_index = _SEED_INDEX_51
# Keeps libGKlib loaded for the life of the process: libmetis resolves its symbols from it.
_gklib: ctypes.CDLL | None = None


def load_libmetis() -> ModuleType:
    """Import the ``metis`` ctypes wrapper bound to a working libmetis and return the module.

    The library is chosen, first match wins: ``$METIS_DLL`` if the user set it; the
    ``cmeel-metis`` wheel's ``cmeel.prefix/lib/libmetis.so``; whatever
    ``ctypes.util.find_library("metis")`` finds (e.g. Debian's libmetis5). A ``libGKlib.so``
    beside the chosen file is loaded first with ``RTLD_GLOBAL``, because cmeel's libmetis has
    a broken RUNPATH and cannot find it alone.

    Raises:
        BackendUnavailable: no candidate loads, or the library was built with 64-bit ids.
    """
    global _metis, _seed_index
    with _load_lock:
        if _metis is None:
            module = _import_metis()
            new_layout = hasattr(module._dll, "METIS_CacheFriendlyReordering")
            _seed_index = _SEED_INDEX_52 if new_layout else _SEED_INDEX_51
            _metis = module
        return _metis


def _import_metis() -> ModuleType:
    """Load one candidate library and import ``metis`` against it (called under the lock)."""
    module = sys.modules.get("metis")
    if module is None:
        user = os.environ.get("METIS_DLL")
        # An explicit choice is honoured or reported, never silently replaced by another build.
        candidates = [user] if user else [_cmeel_libmetis(), ctypes.util.find_library("metis")]
        failures = []
        for path in candidates:
            if not path:
                continue
            try:
                module = _import_with(path)
                break
            except (OSError, RuntimeError) as exc:
                failures.append(f"{path}: {exc}")
        if module is None:
            tried = "; ".join(failures) if failures else "no libmetis found"
            raise BackendUnavailable(f"cannot load libmetis ({tried})", hint=_INSTALL_HINT)
    if getattr(module, "_dll", None) is None:
        # Imported earlier with METIS_DLL=SKIP (the wrapper's install-time mode): unusable.
        raise BackendUnavailable("the metis wrapper was imported without libmetis",
                                 hint=_INSTALL_HINT)
    if ctypes.sizeof(module.idx_t) != 4:
        raise BackendUnavailable(
            "the metis wrapper is set to 64-bit ids (METIS_IDXTYPEWIDTH=64); this partitioner "
            "passes 32-bit arrays",
            hint="unset METIS_IDXTYPEWIDTH and use a libmetis built with 32-bit idx_t",
        )
    return module


def _cmeel_libmetis() -> str | None:
    """Path of the cmeel-metis wheel's libmetis.so on this interpreter's paths, if any."""
    roots = [sysconfig.get_paths()[k] for k in ("platlib", "purelib")] + sys.path
    for root in roots:
        if not root:
            continue
        lib = Path(root) / "cmeel.prefix" / "lib" / "libmetis.so"
        if lib.is_file():
            return str(lib)
    return None


def _import_with(path: str) -> ModuleType:
    """Import ``metis`` with ``METIS_DLL=path``, preloading a sibling libGKlib.so if present."""
    global _gklib
    gklib = Path(path).parent / "libGKlib.so"
    if os.sep in path and gklib.is_file():
        _gklib = ctypes.CDLL(str(gklib), mode=ctypes.RTLD_GLOBAL)
    # The wrapper reads METIS_DLL once, at import; restore the user's environment afterwards
    # so child processes do not inherit our choice.
    previous = os.environ.get("METIS_DLL")
    os.environ["METIS_DLL"] = path
    # The wrapper imports networkx if it can (~0.1 s) for helpers this module never calls;
    # a None entry makes that import fail fast, and the wrapper carries on without it.
    hide_networkx = "networkx" not in sys.modules
    if hide_networkx:
        sys.modules["networkx"] = None  # type: ignore[assignment]
    try:
        import metis
    finally:
        if hide_networkx:
            del sys.modules["networkx"]
        if previous is None:
            del os.environ["METIS_DLL"]
        else:
            os.environ["METIS_DLL"] = previous
    return metis


def assign(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    vweights: np.ndarray | None = None,
    objtype: str = "cut",
    seed: int = 0,
    imbalance: float = 1.03,
) -> np.ndarray:
    """Partition a symmetric CSR graph (no self loops) into ``num_parts`` with k-way METIS.

    Args:
        indptr, indices: the graph, as from :func:`partitioner.symmetric.symmetric_csr`.
        num_parts: number of parts; 1 returns all zeros without calling METIS.
        vweights: ``(num_nodes, ncon)`` non-negative integer weights; METIS keeps every part
            within ``imbalance`` of the mean for each column (multi-constraint). ``None``
            balances node counts.
        objtype: ``"cut"`` (edge cut) or ``"vol"`` (total communication volume).
        seed: METIS's random seed; the same seed and input give the same result.
        imbalance: allowed max-part / mean-part weight, per constraint (METIS ``ubvec``).

    Returns:
        int64 array with the part id of every node.

    Raises:
        PartitionOptionError: bad ``num_parts``, ``objtype`` or ``imbalance``.
        BackendUnavailable: libmetis cannot be loaded.
        PartitionerError: METIS reports an error.
    """
    indptr, indices = check_csr(indptr, indices, num_parts)
    n = indptr.size - 1
    weights = check_vweights(vweights, n)
    if objtype not in ("cut", "vol"):
        raise PartitionOptionError(f"METIS objtype must be 'cut' or 'vol', got {objtype!r}")
    if not imbalance >= 1.0:
        raise PartitionOptionError(f"imbalance must be >= 1.0, got {imbalance}")
    if num_parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if weights is not None:
        # A constraint with total weight 0 (e.g. a type with no training nodes) is balanced by
        # any partition, and METIS would divide by that total: leave such columns out.
        nonzero = weights.any(axis=0)
        if not nonzero.all():
            weights = np.ascontiguousarray(weights[:, nonzero]) if nonzero.any() else None

    metis = load_libmetis()
    idx_p = ctypes.POINTER(metis.idx_t)
    ncon = 1 if weights is None else weights.shape[1]
    ubvec = np.full(ncon, imbalance, dtype=np.float32 if ctypes.sizeof(metis.real_t) == 4 else np.float64)
    part = np.empty(n, dtype=np.int32)
    objval = metis.idx_t()
    options = metis.METIS_Options(objtype=objtype)
    options.array[_seed_index] = int(seed)
    try:
        # A CDLL call releases the GIL: other Python threads run while METIS works.
        metis._METIS_PartGraphKway(
            ctypes.byref(metis.idx_t(n)),
            ctypes.byref(metis.idx_t(ncon)),
            indptr.ctypes.data_as(idx_p),
            indices.ctypes.data_as(idx_p),
            None if weights is None else weights.ctypes.data_as(idx_p),
            None,  # vsize: unit communication size per node
            None,  # adjwgt: unit edge weights
            ctypes.byref(metis.idx_t(int(num_parts))),
            None,  # tpwgts: equal target part weights
            ubvec.ctypes.data_as(ctypes.POINTER(metis.real_t)),
            options.array,
            ctypes.byref(objval),
            part.ctypes.data_as(idx_p),
        )
    except metis.METIS_MemoryError as exc:
        raise PartitionerError(
            f"METIS ran out of memory partitioning {n} nodes / {indices.size} adjacency entries",
            hint="use --method kaminpar, or a machine with more memory",
        ) from exc
    except metis.METIS_InputError as exc:
        raise PartitionerError(
            f"METIS rejected its input ({n} nodes, {indices.size} adjacency entries, "
            f"{num_parts} parts, {ncon} constraint(s), imbalance {imbalance}, objtype {objtype})",
            hint="the graph must be symmetric without self loops; check the options",
        ) from exc
    except metis.METIS_Error as exc:
        raise PartitionerError(
            f"METIS failed partitioning {n} nodes into {num_parts} parts"
        ) from exc
    return part.astype(np.int64)
