"""a0_reranker: close the recall scope right after A0's ``_50_recall_memories`` started its task."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerRecallScopeEnd(Extension):
    async def execute(self, **kwargs: object) -> None:
        recall_entry.after_recall(self.agent)
