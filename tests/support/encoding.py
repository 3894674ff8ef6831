"""Scores that say which pair a server scored, so a test can check every score reached its owner.

Queries and documents carry a number after ``#``; the score is query / 100 + document / 10000. Text
without one (detection's probe, when the identifying GETs ran out of time on a busy machine) gets the
lexical score any real reranker would give it, not a server error.
"""

from __future__ import annotations

from .servers.scoring import lexical_scorer


def number(text: str) -> int | None:
    _, mark, rest = text.partition("#")
    words = rest.split()
    return int(words[0]) if mark and words and words[0].isdigit() else None


def encoding_scorer(query: str, document: str) -> float:
    q, d = number(query), number(document)
    if q is None or d is None:
        return lexical_scorer(query, document)
    return q / 100 + d / 10000


def recall(q: int, n: int = 20) -> tuple[str, list[str]]:
    """Agent ``q``'s recall: its query and ``n`` candidate memories."""
    return f"agent query #{q} about backups", [f"memory #{d} for agent {q}" for d in range(n)]
