"""`langchain_core.embeddings.Embeddings`: sync methods, async ones through `run_in_executor`."""

from __future__ import annotations

from langchain_core.runnables.config import run_in_executor


class Embeddings:
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await run_in_executor(None, self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await run_in_executor(None, self.embed_query, text)
