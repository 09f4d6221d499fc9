# The two commands in README: `make demo` (main job on a built-in default) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# e.g. make figures FIGURES_ARGS=--quick
FIGURES_ARGS ?=

.PHONY: setup demo test lint bench figures clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m dglctl.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check dglctl partitioner runtime tests bench examples

bench: $(STAMP)
	$(BIN)/python bench/partition_bench.py

# Every figure (partition, sampling, pull, training, launch, accuracy parity) with its same-run
# baseline: bench-out/figures/figures.{json,md} and PNGs. About 1M nodes; add --quick for 100k.
figures: $(BENCH_STAMP)
	$(BIN)/python bench/figures.py --out bench-out/figures $(FIGURES_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info demo-out
