"""ParMETIS_V3_PartKway on real MPI ranks (mpiexec on this machine, mpi4py, the library that
tests/setup_mpi.sh installs: PT-Scotch's, 64-bit ids): every node gets a part, the parts are
balanced and cut far fewer edges than a random assignment, on 2, 3 and 4 ranks; and the
library is picked by what is installed and by id width, or named, with a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.timeouts import TIMEOUT
from tests.partitioner.mpi_ranks import REPO, json_line, run_ranks

SCRIPT = Path(__file__).parent / "scripts" / "parmetis_kway.py"


def mpiexec(ranks: int, *args: str, env: dict[str, str] | None = None) -> dict:
    """Rank 0's JSON line of ``SCRIPT args`` on ``ranks`` ranks."""
    return json_line(run_ranks(ranks, [str(SCRIPT), *args], env=env))


@pytest.mark.multiprocess
@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_parmetis_kway_on_mpi_ranks(ranks):
    r = mpiexec(ranks, "3000", "4")
    assert r["library"] == "ptscotch" and r["idx_bits"] == 64, r  # the int64 build first
    assert r["nodes"] == 3000 and (r["min"], r["max"]) == (0, 3), r
    assert min(r["sizes"]) > 0 and r["balance"] <= 1.05, r
    assert r["cut"] < 0.3 * r["random_cut"], r
    # PT-Scotch balances the first weight only; the training nodes' balance is what it got.
    assert r["train_balance"] < 1.5, r


@pytest.mark.multiprocess
def test_the_library_can_be_named_and_a_missing_one_says_how_to_install(tmp_path):
    r = mpiexec(2, "2000", "2", env={
        "DGLCTL_PARMETIS_LIB": "/usr/lib/x86_64-linux-gnu/libptscotchparmetisv3.so",
        "DGLCTL_PARMETIS_IDX_BITS": "32"})
    assert r["idx_bits"] == 32 and min(r["sizes"]) > 0 and r["cut"] < 0.3 * r["random_cut"], r
    code = ("from partitioner.methods.parmetis import load_library\n"
            "try:\n    load_library()\n"
            "except Exception as e:\n    raise SystemExit(f'{e}\\nhint: {e.hint}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=6 * TIMEOUT, cwd=REPO,
                          env={**os.environ, "DGLCTL_PARMETIS_LIB": str(tmp_path / "no.so")})
    assert proc.returncode != 0
    assert f"tried {tmp_path / 'no.so'} (" in proc.stderr and "cannot open" in proc.stderr, \
        proc.stderr
    assert "apt-get install libptscotch-dev" in proc.stderr, proc.stderr
