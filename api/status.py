"""POST /api/plugins/a0_reranker/status: counters and state for the panel's live status (a0_hooks/api_handlers.py)."""

from typing import Any

from helpers.api import ApiHandler, Request

from usr.plugins.a0_reranker.a0_hooks import api_handlers


class Status(ApiHandler):
    async def process(self, input: dict[str, Any], request: Request) -> dict[str, Any]:
        return api_handlers.status(input)
