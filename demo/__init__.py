"""The embedded demo: sample memories, an embedding-like "before" order and a tiny reference reranker
server (word overlap, Infinity's API) so that ``a0-reranker demo`` runs with no setup at all.

Nothing here is used by the plugin inside Agent Zero.
"""
