"""The demo's two stand-in scorers (neither is a model), over the same crude words: lower-case tokens,
suffix stemming.

``embedding_order``, the "before", is a bag-of-words cosine: one vector per text counting every word,
so it rewards shared surface words and penalises long texts, as one embedding per memory blurs the
detail. ``word_overlap_score``, the demo server's, stands in for a cross-encoder: the share of the
query's content words in the document, plus a bonus for query word pairs that stand side by side there.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Final

PAIR_WEIGHT = 0.25
_WORD: Final = re.compile(r"[a-z0-9]+")
_SUFFIXES: Final = ("ing", "ed", "es", "s", "e")
STOP_WORDS: Final = frozenset((
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was",
    "were", "we", "what", "when", "which", "who", "why", "with", "you", "your",
))


def stem(word: str) -> str:
    """Drop one common suffix, so "upgraded", "upgrading" and "upgrade" meet as "upgrad"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stems(text: str, *, content_only: bool = False) -> list[str]:
    return [stem(word) for word in _WORD.findall(text.lower()) if not (content_only and word in STOP_WORDS)]


def bag_of_words_cosine(query: str, text: str) -> float:
    a, b = Counter(stems(query)), Counter(stems(text))
    dot = sum(count * b[word] for word, count in a.items())
    norms = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return dot / norms if norms else 0.0


def embedding_order(query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
    """``(index, similarity)`` best first, as a vector store returns them; ties keep input order."""
    scored = [(index, bag_of_words_cosine(query, text)) for index, text in enumerate(texts)]
    return sorted(scored, key=lambda item: (-item[1], item[0]))


def word_overlap_score(query: str, document: str) -> float:
    """Relevance in [0, 1]: 1.0 when every content word of the query appears, in the same pairs."""
    wanted = stems(query, content_only=True)
    if not wanted:
        return 0.0
    found = stems(document, content_only=True)
    coverage = len(set(wanted) & set(found)) / len(set(wanted))
    query_pairs = set(pairwise(wanted))
    if not query_pairs:
        return coverage
    document_pairs = {frozenset(pair) for pair in pairwise(found)}
    pairs = sum(1 for pair in query_pairs if frozenset(pair) in document_pairs) / len(query_pairs)
    return (1 - PAIR_WEIGHT) * coverage + PAIR_WEIGHT * pairs
