"""a0_reranker: clear a recall scope left open by a failed step, before memorize starts (``_50``)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import recall_entry


class A0RerankerRecallScopeClear(Extension):
    async def execute(self, **kwargs: object) -> None:
        recall_entry.on_monologue_end(self.agent)
