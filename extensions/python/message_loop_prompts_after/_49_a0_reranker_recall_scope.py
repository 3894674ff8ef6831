"""a0_reranker: open the recall scope just before A0's ``_50_recall_memories`` (see a0_hooks/recall_entry.py)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerRecallScope(Extension):
    async def execute(self, **kwargs: object) -> None:
        recall_entry.before_recall(self.agent)
