"""a0_reranker: rerank Agent Zero's recalled memories with a cross-encoder reranker server. The repository root is
the A0 plugin folder (``usr.plugins.a0_reranker`` in A0) and, installed standalone, the package ``a0_reranker``.
Nothing is imported here on purpose: A0 loads the plugin's entry points by path, and importing the package must
stay free of side effects."""

__version__ = "2.0.0"
