"""Scores that say which pair a server scored, so a test can check every score reached its owner.

Queries and documents carry a number after ``#``; the score is query / 100 + document / 10000.
"""

from __future__ import annotations


def number(text: str) -> int:
    return int(text.split("#")[1].split()[0])


def encoding_scorer(query: str, document: str) -> float:
    return number(query) / 100 + number(document) / 10000


def recall(q: int, n: int = 20) -> tuple[str, list[str]]:
    """Agent ``q``'s recall: its query and ``n`` candidate memories."""
    return f"agent query #{q} about backups", [f"memory #{d} for agent {q}" for d in range(n)]
