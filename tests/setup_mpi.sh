#!/usr/bin/env bash
# Open MPI (mpiexec, libmpi) and PT-Scotch's ParMETIS-compatible library for the distributed
# partitioner's tests: they start real MPI ranks on this machine. Installs them with apt-get
# when missing and we are root; otherwise fails with the fix (missing, they are a failure,
# not a skip). Used by `make test` (its `mpi` step) and so by .ci/run.
set -euo pipefail
have() {
  command -v mpiexec >/dev/null &&
    { [ -e /usr/lib/"$(uname -m)"-linux-gnu/scotch-int64/libptscotchparmetisv3.so ] ||
      [ -e /usr/lib/"$(uname -m)"-linux-gnu/libptscotchparmetisv3.so ]; }
}
have && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "== installing Open MPI and PT-Scotch (mpiexec or libptscotchparmetisv3 is missing)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openmpi-bin libopenmpi-dev libptscotch-dev >/dev/null
  have && exit 0
fi
echo "setup_mpi: mpiexec or PT-Scotch's libptscotchparmetisv3 is missing and cannot be" \
     "installed here (needs root and apt-get); install them, e.g. 'sudo apt-get install" \
     "openmpi-bin libopenmpi-dev libptscotch-dev'" >&2
exit 1
