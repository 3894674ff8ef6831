"""The ``reranker_status`` tool: is the memory reranker working? (a0_hooks/status.py does the work). No tool
prompt, which every LLM call would pay for: the ``reranker-status`` skill shows the agent the call."""

from typing import Any

from helpers.tool import Response, Tool

from usr.plugins.a0_reranker.a0_hooks import status


class RerankerStatus(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        return Response(message=await status.report(self.agent), break_loop=False)
