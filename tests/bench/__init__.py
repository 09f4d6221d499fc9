"""Tests of the benchmarks in bench/: they import, and every figure runs end to end."""
