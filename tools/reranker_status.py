"""The ``reranker_status`` tool: is the memory reranker working? (a0_hooks/status.py does the work).

It has no tool prompt, which every agent would pay for on every LLM call: the ``reranker-status``
skill, loaded only when someone asks, shows the agent the call, and A0 finds the tool by its name."""

from typing import Any

from helpers.tool import Response, Tool

from usr.plugins.a0_reranker.a0_hooks import status


class RerankerStatus(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        return Response(message=await status.report(self.agent), break_loop=False)
