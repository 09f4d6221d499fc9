#!/usr/bin/env bash
# `make test-loaded`: the whole suite with two CPU-bound busy loops beside it, as on a shared,
# busy machine. Run it once per change that touches timing; the loops end with the suite,
# even when it fails or is interrupted.
set -euo pipefail
PY="${1:?usage: tests/run_loaded.sh PYTHON [pytest args...]}"
shift
loops=()
cleanup() { kill "${loops[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
for _ in 1 2; do
    "$PY" -c "while True: pass" &
    loops+=("$!")
done
echo "busy loops: ${loops[*]}" >&2
"$PY" -m pytest -q tests "$@"
