"""The command line: ``a0-reranker`` / ``python -m a0_reranker`` (probe, rerank, demo, bench).

``main`` parses and dispatches; one module per command; ``formatting`` renders text. Every command
is a consumer of the public engine API (``service.runtime``, ``rerank_pool`` included).
"""
