"""A0 `models.py`, reduced to the embedding model memory uses: a deterministic, offline stand-in.

`HashEmbeddings` is a hashed bag of words: lower-case `[a-z0-9_]+` tokens (minus a few stopwords
and the labels of A0's history text such as `user`/`user_message`), each hashed with blake2b to a
signed slot of a `dim`-dimensional vector, L2-normalised. Same words -> cosine 1; disjoint words ->
about 0 (relevance 0.5 after A0's `(1+ip)/2`). No network, no model.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

_TOKEN = re.compile(r"[a-z0-9_]+")
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "and",
        "or",
        "to",
        "in",
        "on",
        "is",
        "are",
        "be",
        "it",
        "for",
        "with",
        "user",
        "ai",
        "user_message",
        "system_message",
        "attachments",
    }
)


@dataclass
class ModelConfig:
    provider: str = "standin"
    name: str = "hash-bow"
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build_kwargs(self) -> dict[str, Any]:
        return dict(self.kwargs)


class HashEmbeddings(Embeddings):
    def __init__(self, dim: int = 4096) -> None:
        self.dim = dim

    def tokens(self, text: str) -> list[str]:
        return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]

    def embed_query(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for token in self.tokens(text):
            digest = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
            vec[digest % self.dim] += 1.0 if (digest >> 63) & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def get_embedding_model(provider: str = "standin", name: str = "hash-bow", **kwargs: Any) -> HashEmbeddings:
    return HashEmbeddings(**{k: v for k, v in kwargs.items() if k == "dim"})
