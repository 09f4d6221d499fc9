"""Light imports, measured in a fresh interpreter: ``import runtime`` and a server process load
neither torch nor the partition writer (``partitioner.pipeline`` and its partitioning
backends); a trainer's API loads torch but still not the writer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testing.timeouts import TIMEOUT

pytestmark = pytest.mark.multiprocess

HEAVY = ("torch", "partitioner.pipeline", "partitioner.methods", "metis", "kaminpar")


def _loaded(code: str) -> dict[str, bool]:
    probe = f"import json, sys\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=6 * TIMEOUT, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_runtime_and_the_server_load_neither_torch_nor_the_writer():
    for code in ("import runtime", "import runtime.server.graph_server",
                 "from runtime.server.__main__ import main"):
        loaded = _loaded(code)
        assert not any(loaded.values()), (code, loaded)


def test_an_agent_and_a_command_start_without_importlib_metadata():
    # Its import (email parsing, zipfile) was most of an agent's start-up; the version is
    # read from the distribution's METADATA file instead (partitioner/version.py).
    for code in ("import dglctl.agent.__main__", "import dglctl.cli"):
        out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n"
                              "print('importlib.metadata' in sys.modules)"],
                             capture_output=True, text=True, timeout=6 * TIMEOUT, check=True)
        assert out.stdout.split()[-1] == "False", (code, out.stdout)


def test_the_trainer_api_loads_torch_but_not_the_writer():
    loaded = _loaded("from runtime import DistGraph, DistDataLoader, NeighborSampler")
    assert loaded["torch"]
    assert not any(v for k, v in loaded.items() if k != "torch"), loaded


def test_kernel_warm_up_skips_numbas_blas_probe_and_leaves_scipy_usable():
    # The probe imports all of scipy.linalg (0.4 s of every trainer's and server's start-up);
    # afterwards scipy.linalg imports as usual and numba's np.dot still finds BLAS.
    code = """
import json, sys
import numpy as np
from runtime.sampling import kernels
kernels.warm_up()
probed = "scipy.linalg" in sys.modules
import scipy.linalg
from numba import njit
a = np.arange(6.0).reshape(2, 3)
dot = njit(lambda x, y: np.dot(x, y))(a, a.T)
conv = njit(lambda x, y: np.convolve(x, y))(np.ones(3), np.ones(2))
print(json.dumps({"probed": probed, "dot": dot.tolist(), "conv": conv.tolist(),
                  "det": float(scipy.linalg.det(np.eye(2)))}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=12 * TIMEOUT, check=True).stdout
    got = json.loads(out.splitlines()[-1])
    assert got == {"probed": False, "dot": [[5.0, 14.0], [14.0, 50.0]],
                   "conv": [1.0, 2.0, 2.0, 1.0], "det": 1.0}
