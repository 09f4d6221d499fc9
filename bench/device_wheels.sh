#!/usr/bin/env bash
# Fill .whl/ with the wheels bench/device_check.sh installs on the device machine (x86-64,
# Python 3.12 holding torch, numpy, numba, scipy, msgpack, xxhash and pyyaml, no registry
# reachable), which lacks pyzmq, METIS and pytest: about 2 MB, the versions this repository is
# tested with. Run here, from anywhere; .whl/ stays out of git (.git/info/exclude), and a
# device run carries it (carry: [".whl"]).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    plat+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" -d .whl \
    pyzmq==27.3.0 cmeel-metis==5.2.1.1 cmeel-gklib==0.0.1 cmeel==0.62.0
# pytest, for the GPU tests device_check.sh runs first (pure Python).
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl \
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4
# The ctypes wrapper "metis" is published as a source archive only: pure Python, made into a
# wheel here.
sdist=$(mktemp -d)
trap 'rm -rf "$sdist"' EXIT
python3 -m pip download -q --no-deps --no-binary=:all: -d "$sdist" metis==0.2a5
python3 -m pip wheel -q --no-deps -w .whl "$sdist"/metis-*.tar.gz
ls -l .whl
