"""a0_reranker: open the recall scope just before A0's ``_50_recall_memories`` (see a0_hooks/seams.py)."""

from typing import Any

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import seams


class A0RerankerRecallScope(Extension):
    async def execute(self, **kwargs: Any) -> None:
        seams.before_recall(self.agent)
