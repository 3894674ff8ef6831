"""The ``reranker_status`` tool: is the memory reranker working? (a0_hooks/status.py does the work)."""

from typing import Any

from helpers.tool import Response, Tool

from usr.plugins.a0_reranker.a0_hooks import status


class RerankerStatus(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        return Response(message=await status.report(self.agent), break_loop=False)
