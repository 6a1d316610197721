"""Benchmarks (pytest-benchmark); see bench_clusters.py."""
