#!/usr/bin/env bash
# The figures that need idle cores, in one command for a larger machine (the device machine:
# 16 cores and a GPU; or any Linux box with this repository): the GPU tests of
# tests/runtime/test_device.py and the GPU-vs-CPU epoch (bench.gpu_epoch), the trainer's wait with and without the
# prefetch thread (bench.prefetch_bench), the runtime's figures with 4 clients on 1 vs 2
# servers per machine (bench.runtime_bench), and each phase of the epoch against its floor
# (bench.epoch_floor, on prefetch_bench's 1M-node partitions). Each benchmark's output
# lands in $OUT/NAME.out as soon as it ends (its last line the JSON; errors in NAME.log), so a
# run stopped at its time limit still returns what finished; the timings print as they go.
#
#   here, once:  bash bench/device_wheels.sh      (.whl/: what that machine's Python lacks)
#   there:       bash bench/device_check.sh       (device: carry [".whl"]; OUT is set there)
#   here, tried: PYTHON=.venv/bin/python SMOKE=1 bash bench/device_check.sh
#
# SMOKE=1 runs each benchmark on its smallest graph (minutes on 2 cores): a check of the
# script, not figures. .whl/ is installed only into a Python without pyzmq. Here SMOKE=1
# took 3.4 min (runtime_bench's load tests run for fixed seconds: 2.5 min of it); the three
# run in the order of what a larger machine is wanted for (the trainer's wait with idle
# cores, then 1 vs 2 servers, then the floors), so a run cut at its limit keeps the first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/dglctl-device-out}"
PY="${PYTHON:-python3}"
WORK="${WORK:-$(mktemp -d /tmp/dglctl-device-XXXX)}"
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The wheels are for a Python without pyzmq (the device's); one that has it has the rest.
if compgen -G ".whl/*.whl" >/dev/null && ! "$PY" -c 'import zmq' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/dglctl-site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/dglctl-site:$PYTHONPATH"
fi
smoke=()
runtime_size=(--repeat 3)
if [[ "${SMOKE:-0}" == 1 ]]; then
    smoke=(--smoke)
    runtime_size=(--nodes 20000 --repeat 1)
fi

failed=0
run() {  # NAME COMMAND...: stdout to $OUT/NAME.out, stderr to $OUT/NAME.log
    local name=$1 t0=$SECONDS
    shift
    echo "$(date +%T) $name: $*"
    if "$@" >"$OUT/$name.out" 2>"$OUT/$name.log"; then
        echo "$(date +%T) $name: done in $((SECONDS - t0)) s"
    else
        echo "$(date +%T) $name: FAILED (exit $?) after $((SECONDS - t0)) s; its log ends:"
        tail -n 20 "$OUT/$name.log"
        failed=1
    fi
}

"$PY" -c 'import os, sys, torch, numba, zmq
print(f"{os.cpu_count()} cores, python {sys.version.split()[0]}, torch {torch.__version__}, "
      f"numba {numba.__version__}, pyzmq {zmq.__version__}, cuda {torch.cuda.is_available()}")' \
    || exit 1
# Issue 24's GPU tests first (they skip, saying why, where torch sees no CUDA device): the
# loaders' device path on the real CUDA plan, and the recording plan's tests beside it.
run gpu_tests "$PY" -m pytest -q -p no:cacheprovider tests/runtime/test_device.py
# The GPU epoch against the CPU epoch, same run (1M nodes, 2 loopback hosts on one GPU).
run gpu_epoch "$PY" -m bench.gpu_epoch --workdir "$WORK/epoch" --json "${smoke[@]}"
run prefetch_bench "$PY" -m bench.prefetch_bench --workdir "$WORK/epoch" --repeat 2 --json \
    "${smoke[@]}"
run runtime_bench "$PY" -m bench.runtime_bench --workdir "$WORK/runtime" --json \
    "${runtime_size[@]}"
run epoch_floor "$PY" -m bench.epoch_floor --workdir "$WORK/epoch" --json "${smoke[@]}"
rm -rf "$WORK"
exit "$failed"
