"""The command line: ``a0-reranker`` / ``python -m a0_reranker`` (probe, rerank, demo, bench), one module
per command, each a consumer of the public engine API (``service.runtime``)."""
