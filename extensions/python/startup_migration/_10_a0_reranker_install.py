"""a0_reranker: wrap the memory search once at startup (idempotent; see a0_hooks/lifecycle.py)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import lifecycle


class A0RerankerStartup(Extension):
    def execute(self, **kwargs: object) -> None:
        lifecycle.wrap("startup")
