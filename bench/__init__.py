"""Developer tools, not shipped: the benchmark servers, the load drivers, the benchmark program
(``python -m a0_reranker.bench``) and the Hub thumbnail's drawing. The installed package and A0 never import them."""

PROG = "python -m a0_reranker.bench"  # how the benchmark program names itself in its usage and errors
