"""a0_reranker: open the recall scope just before A0's ``_50_recall_memories`` (see a0_hooks/settings.py)."""

from typing import Any

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import settings


class A0RerankerRecallScope(Extension):
    async def execute(self, **kwargs: Any) -> None:
        settings.before_recall(self.agent)
