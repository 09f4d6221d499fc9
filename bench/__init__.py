"""dglctl's benchmarks, each against a baseline measured in the same run.

Run them from the repository root as modules: ``python -m bench.NAME [--help]``, e.g.
``python -m bench.figures --quick`` (every figure; ``--smoke``: a tiny run that only checks
they all work, what ``make test`` runs) or ``python -m bench.partition_bench`` (``make bench``).

Shared code:
  common    the repository, graphs and partitions, timing, CPU counters, the DGL venv
  jobs      jobs a benchmark starts: servers started directly, dglctl commands' environment
            and cluster files, free ports, what of a job is left
Benchmarks: partition_bench, methods_bench (partitioning); runtime_bench, epoch_bench,
security_bench (the runtime); launch_bench, ssh_bench (the launcher); accuracy_bench (parity);
figures (+ figures_report, figures_plot) runs the figures of docs/benchmarks.md in one go.
Against DGL 1.1.3 (its own venv, bench/dgl_env.sh): sampling_vs_dgl, dist_vs_dgl; the files
run by path with that venv's python: _dgl_sampler.py, _dgl_dist.py, and scripts/dist_bench.py
(a DGL user's script; dgl_imports makes its dglctl copy).
"""
