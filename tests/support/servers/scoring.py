"""Relevance for the test servers: a deterministic lexical scorer, logits, and a token stand-in.

Real servers run a neural cross-encoder; the tests only need scores that rank clearly relevant
documents far above unrelated ones, identically on every run and every machine.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable

Scorer = Callable[[str, str], float]
"""(query, document) -> relevance in [0, 1]."""

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "did", "for", "from", "has",
    "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should", "that",
    "the", "their", "then", "there", "these", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
))
_TIE_WEIGHT = 0.001
_LOGIT_CLAMP = 1e-4


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words without stopwords; all words when nothing else is left."""
    words = frozenset(_WORD.findall(text.lower()))
    return (words - _STOPWORDS) or words


def stable_fraction(*parts: str) -> float:
    """A value in [0, 1) fixed by the text alone (blake2b, so equal on every run and machine)."""
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def lexical_scorer(query: str, document: str) -> float:
    """Relevance in [0, 1): mostly how many query words the document covers, plus their Jaccard.

    Coverage keeps long relevant documents high; Jaccard prefers the focused one; a tiny hash of the
    pair orders otherwise equal documents deterministically.
    """
    q, d = content_words(query), content_words(document)
    shared = len(q & d)
    coverage = shared / len(q) if q else 0.0
    jaccard = shared / len(q | d) if q | d else 0.0
    overlap = 0.8 * coverage + 0.2 * jaccard
    return (1 - _TIE_WEIGHT) * overlap + _TIE_WEIGHT * stable_fraction(query, document)


def to_logit(probability: float) -> float:
    """The raw classifier output whose sigmoid is ``probability`` (clamped to about -9.2..+9.2)."""
    p = min(max(probability, _LOGIT_CLAMP), 1 - _LOGIT_CLAMP)
    return math.log(p / (1 - p))


def count_tokens(text: str) -> int:
    """Token stand-in: one token per 4 characters, rounded up (no real tokenizer in tests)."""
    return math.ceil(len(text) / 4)


def pair_tokens(query: str, document: str) -> int:
    """Tokens of one (query, document) prompt, counted on the joined text; no special tokens."""
    return count_tokens(query + document)


def chars_for_tokens(tokens: int) -> int:
    """How many characters fit in ``tokens`` under the stand-in."""
    return 4 * tokens
