"""a0_reranker: close the ``memory_load`` scope after the tool ran."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerMemoryLoadScopeEnd(Extension):
    async def execute(self, tool_name: str = "", **kwargs: object) -> None:
        recall_entry.after_tool(self.agent, tool_name)
