"""a0_reranker: the ``memory_load`` tool's search is reranked like a recall; open its scope."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerMemoryLoadScope(Extension):
    async def execute(self, tool_name: str = "", **kwargs: object) -> None:
        recall_entry.before_tool(self.agent, tool_name)
