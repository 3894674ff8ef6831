"""a0_reranker: close the recall scope right after A0's ``_50_recall_memories`` started its task, in the
loop's own context, so tasks started later at ``monologue_end`` do not inherit it (the recall task kept its copy)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerRecallScopeEnd(Extension):
    async def execute(self, **kwargs: object) -> None:
        recall_entry.end()
