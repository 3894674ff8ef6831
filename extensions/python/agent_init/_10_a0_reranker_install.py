"""a0_reranker: wrap the memory search for every new agent (idempotent; see a0_hooks/lifecycle.py)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import lifecycle


class A0RerankerAgentInit(Extension):
    def execute(self, **kwargs: object) -> None:
        lifecycle.wrap("agent_init")
