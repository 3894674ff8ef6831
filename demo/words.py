"""Words as the demo's two stand-in scorers see them: lower-case tokens, crude suffix stemming."""

from __future__ import annotations

import re
from typing import Final

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


def stems(text: str) -> list[str]:
    """Every word, stemmed, stop words included (what a bag-of-words vector counts)."""
    return [stem(word) for word in _WORD.findall(text.lower())]


def content_stems(text: str) -> list[str]:
    """The words that carry meaning, stemmed, in order."""
    return [stem(word) for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]
