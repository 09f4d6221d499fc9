#!/usr/bin/env bash
# Create (once) a separate venv with DGL 1.1.3 for side-by-side benchmarks; print its python.
# DGL is never a dependency of dglctl: this venv is only for the side-by-side benchmarks
# (python -m bench.sampling_vs_dgl, python -m bench.dist_vs_dgl; bench/common.py finds it).
#   bench/dgl_env.sh            # venv at ${DGL_VENV:-/tmp/dgl-venv}
#   DGL_VENV=~/dgl bench/dgl_env.sh
set -euo pipefail

VENV="${DGL_VENV:-/tmp/dgl-venv}"
PY="$VENV/bin/python"
# DGL 2.x does not run here; torch 2.13.0's CPU wheel lies in /opt/wheels (pip's find-links).
# No "setuptools<70" pin: torch 2.13.0 requires setuptools>=77.0.3, so pip refuses both at once,
# and DGL 1.1.3 only falls back to setuptools' vendored copy of packaging when packaging is absent.
PACKAGES=(torch==2.13.0 dgl==1.1.3 pandas pyyaml pydantic packaging)
# Without it, 'import dgl' writes ~/.dgl/config.json to pick a backend.
export DGLBACKEND=pytorch

ready() {
    [[ -x "$PY" ]] && "$PY" - <<'EOF' >/dev/null 2>&1
import dgl, torch
assert dgl.__version__.startswith("1.1.3"), dgl.__version__
assert torch.__version__.startswith("2.13.0"), torch.__version__
EOF
}

if ! ready; then
    if [[ ! -x "$PY" ]]; then
        echo "creating $VENV (python3.11)" >&2
        python3.11 -m venv "$VENV"
    fi
    "$PY" -m pip install --quiet "${PACKAGES[@]}" >&2
    if ! ready; then
        echo "error: $VENV was set up but 'import dgl' (1.1.3) still fails; try:" >&2
        echo "  $PY -c 'import dgl'" >&2
        exit 1
    fi
fi
echo "$PY"
