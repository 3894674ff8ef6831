"""The demo's "before": a deterministic bag-of-words cosine standing in for embedding similarity.

One vector per text, counting every (stemmed) word, stop words included, so it rewards shared surface
words and penalises long texts, the way a single embedding per memory blurs the detail. It is a
stand-in for the vector search Agent Zero runs, not a model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from .words import stems


def bag_of_words_cosine(query: str, text: str) -> float:
    """Cosine similarity of the two texts' word-count vectors, in [0, 1]."""
    a, b = Counter(stems(query)), Counter(stems(text))
    dot = sum(count * b[word] for word, count in a.items())
    norms = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return dot / norms if norms else 0.0


def embedding_order(query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
    """``(index, similarity)`` best first, as a vector store returns them; ties keep input order."""
    scored = [(index, bag_of_words_cosine(query, text)) for index, text in enumerate(texts)]
    return sorted(scored, key=lambda item: (-item[1], item[0]))
