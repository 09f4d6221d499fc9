# The two commands in README: `make demo` (main job on a built-in default) and `make test`
# (sets itself up on a fresh machine: the virtualenv, openssh-server, Open MPI and Slurm for the
# multi-host tests).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
# e.g. make figures FIGURES_ARGS=--quick
FIGURES_ARGS ?=
# pytest-xdist workers for `make test` and `make test-loaded` (0: none, the tests run in this
# process). On the 2-core machine, the same evening: 1645 s on 2 workers, 2154 s on none
# (docs/install.md).
TEST_WORKERS ?= 2

.PHONY: setup sshd mpi slurm demo test test-fast test-loaded lint layers typecheck docs bench figures clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The tested torch first (the CPU build from the machines' wheel folder): pyproject's
	# torch>=2.13 alone would let pip pick a newer, multi-GB CUDA build from PyPI.
	$(BIN)/python -m pip install -q 'torch==2.13.0'
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,docs]'
	touch $(DOCS_STAMP)

setup: $(STAMP)

# /usr/sbin/sshd for the SSH tests (apt-get when missing and root; else fails with the fix).
sshd:
	bash tests/setup_sshd.sh

# Open MPI and PT-Scotch for the distributed partitioner's tests (the same way as sshd).
mpi:
	bash tests/setup_mpi.sh

# Slurm (slurmctld, slurmd, srun) and munge for the Slurm tests, whose fixture starts its own
# controller and two nodes on this machine (the same way as sshd).
slurm:
	bash tests/setup_slurm.sh

demo: $(STAMP)
	$(BIN)/python -m dglctl.demo

# tests/bench runs every benchmark figure on a tiny graph (python -m bench.figures --smoke),
# so a benchmark that breaks fails the suite. The 25 slowest tests are listed at the end, so
# the next slow test is seen the day it lands.
test: $(STAMP) sshd mpi slurm
	$(BIN)/python -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadgroup tests

# The edit loop's tier: the unit tests (no processes, no network), in about a minute.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q --durations=10 -n 2 --dist loadgroup -m unit tests

# The same suite with two busy loops beside it (every wait in the tests derives from
# DGLCTL_TEST_TIMEOUT, so it must pass on a loaded machine too).
test-loaded: $(STAMP) sshd mpi slurm
	bash tests/run_loaded.sh $(BIN)/python --durations=25 -n $(TEST_WORKERS) --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check dglctl partitioner runtime tests bench examples

# The packages' structure (no cycles, layers, sizes; docs/architecture.md): part of `make test`, and
# alone in a second.
layers: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_layers.py

# mypy on the three packages (none may have a type error), and --strict on the boundaries: the
# agent's protocol, the wire messages, the job plan, the partition format (PartConfig).
TYPED := dglctl/agent/protocol.py runtime/rpc/messages.py dglctl/jobs/plan.py partitioner/format.py
typecheck: $(STAMP)
	$(BIN)/python -m mypy --follow-imports=silent --ignore-missing-imports \
		--cache-dir build/mypy dglctl partitioner runtime
	$(BIN)/python -m mypy --strict --follow-imports=silent --ignore-missing-imports \
		--cache-dir build/mypy-strict $(TYPED)

# The documentation site from docs/ (mkdocs.yml): build/site. --strict fails on a broken link,
# a page missing from the nav or an API directive whose object is gone (docs/install.md).
docs: $(DOCS_STAMP)
	$(BIN)/python -m mkdocs build --strict --site-dir build/site

bench: $(STAMP)
	$(BIN)/python -m bench.partition_bench

# Every figure (partition, sampling, pull, training, launch, accuracy parity) with its same-run
# baseline: bench-out/figures/figures.{json,md} and PNGs. About 1M nodes; add --quick for 100k.
figures: $(BENCH_STAMP)
	$(BIN)/python -m bench.figures --out bench-out/figures $(FIGURES_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info demo-out
