"""The embedded demo, so that ``a0-reranker demo`` needs no setup: the sample recall and two stand-in scorers
(neither is a model) here, a reference server in ``server``; nothing here is used inside Agent Zero. Asked "What
changed in the March 1 upgrade?", a plain embedding search puts an unrelated connectivity memory that shares
"Agent Zero" and "March" on top, and the two memories about the upgrade fall outside the five A0 keeps."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Final

QUERY: Final = "What changed in the March 1 upgrade?"
KEEP: Final = 5  # A0 keeps memory_recall_memories_max_result (5) memories for the prompt
MEMORIES: Final[tuple[str, ...]] = (
    "In March the router changed the IP of the Ollama host, and Agent Zero lost the connection to it.",
    "Release notes for Agent Zero v0.9.7, upgraded on March 1. Changes: settings moved to "
    "usr/settings.json, knowledge to usr/knowledge, plugins are enabled per project.",
    "The user likes answers in English, short summaries and links to the sources.",
    "Since upgrading on March 1, scheduled tasks use each project's own timezone instead of UTC.",
    "Backups of the memory folder run every night at 02:00 to the NAS; restore with the backup tool in the settings.",
    "The user changed the default chat model in the settings from GPT-4o to Claude.",
    "The user's birthday is March 14; remind them a day before.",
    "The system prompt was changed in the prompts folder to ask for step-by-step plans.",
    "Agent Zero runs in Docker: start it with docker compose up -d in the a0 folder.",
    "The search engine SearXNG runs on port 8888 inside the container.",
)

PAIR_WEIGHT = 0.25
_WORD: Final = re.compile(r"[a-z0-9]+")
_SUFFIXES: Final = ("ing", "ed", "es", "s", "e")
STOP_WORDS: Final = frozenset((
    "a", "about", "after", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was",
    "were", "we", "what", "when", "which", "who", "why", "with", "you", "your",
))


def stems(text: str, *, content_only: bool = False) -> list[str]:
    """Lower-case words less one common suffix, so "upgraded", "upgrading" and "upgrade" meet as "upgrad"."""
    found = []
    for word in _WORD.findall(text.lower()):
        if not (content_only and word in STOP_WORDS):
            suffix = next((s for s in _SUFFIXES if word.endswith(s) and len(word) - len(s) >= 3), "")
            found.append(word[: len(word) - len(suffix)])
    return found


def embedding_order(query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
    """The "before": ``(index, similarity)`` best first by bag-of-words cosine, ties in input order. One vector
    per text counting every word rewards shared surface words and penalises long texts, as one embedding blurs."""
    wanted = Counter(stems(query))
    scored = []
    for index, text in enumerate(texts):
        counts = Counter(stems(text))
        norms = math.sqrt(sum(v * v for v in wanted.values()) * sum(v * v for v in counts.values()))
        scored.append((index, sum(n * counts[word] for word, n in wanted.items()) / norms if norms else 0.0))
    return sorted(scored, key=lambda item: (-item[1], item[0]))


def word_overlap_score(query: str, document: str) -> float:
    """The demo server's stand-in for a cross-encoder, in [0, 1]: the share of the query's content words in the
    document, plus a bonus for query word pairs that stand side by side there."""
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
