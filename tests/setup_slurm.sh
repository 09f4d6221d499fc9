#!/usr/bin/env bash
# Slurm (slurmctld, slurmd, srun/salloc/sbatch) and munge for the Slurm tests: their fixture
# (testing/slurm.py) starts its own controller and two slurmd (n1 on 127.0.0.1, n2 on
# 127.0.0.2) on this machine, so only the programs must be here. Installs them with apt-get
# when missing and we are root; otherwise fails with the fix (missing, they are a failure,
# not a skip). Used by `make test` (its `slurm` step) and so by .ci/run.
set -euo pipefail
have() {
  command -v srun >/dev/null && command -v munged >/dev/null &&
    { command -v slurmctld-wlm >/dev/null || command -v slurmctld >/dev/null; } &&
    { command -v slurmd-wlm >/dev/null || command -v slurmd >/dev/null; }
}
have && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "== installing Slurm and munge (slurmctld, slurmd, srun or munged is missing)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
  have && exit 0
fi
echo "setup_slurm: Slurm's slurmctld, slurmd and srun, or munge's munged, are missing and" \
     "cannot be installed here (needs root and apt-get); install them, e.g. 'sudo apt-get" \
     "install slurmctld slurmd slurm-client munge'" >&2
exit 1
