"""Benchmarks: the cost-model server and the naive-versus-batched comparison (run: python -m bench)."""
