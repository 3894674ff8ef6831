"""a0_reranker: wrap the memory search once at startup (idempotent; see a0_hooks/memory_patch.py)."""

from typing import Any

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import settings


class A0RerankerStartup(Extension):
    def execute(self, **kwargs: Any) -> None:
        settings.on_startup()
