"""a0_reranker: close the ``memory_load`` scope after the tool ran."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerMemoryLoadScopeEnd(Extension):
    async def execute(self, tool_name: str = "", **kwargs: object) -> None:
        if tool_name == "memory_load":
            recall_entry.end()
