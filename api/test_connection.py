"""POST /api/plugins/a0_reranker/test_connection: probe the unsaved settings of the panel (a0_hooks/api_handlers.py)."""

from typing import Any

from helpers.api import ApiHandler, Request

from usr.plugins.a0_reranker.a0_hooks import api_handlers


class TestConnection(ApiHandler):
    async def process(self, input: dict[str, Any], request: Request) -> dict[str, Any]:
        return await api_handlers.test_connection(input)
