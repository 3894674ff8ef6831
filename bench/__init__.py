"""Benchmarks: the cost-model server and the naive-versus-batched comparison (run: a0-reranker bench)."""
