"""The command line: ``a0-reranker`` / ``python -m a0_reranker`` (probe, rerank, demo, bench).

``main`` parses and dispatches; one module per command; ``options`` builds their server config,
``formatting`` renders text and ``exits`` ends a command on a user error or a signal. Every command
is a consumer of the public engine API (``service.runtime``, ``rerank_pool`` included).
"""
