"""Orders shared by every rerank answer: best first, ties by input position, then a cut."""

from __future__ import annotations

from collections.abc import Sequence


def best_first(scores: Sequence[float]) -> list[int]:
    """Indices sorted by score, highest first; equal scores keep input order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def cut(order: list[int], top: int | None) -> list[int]:
    """The first ``top`` entries; ``None`` keeps all."""
    return order if top is None else order[: max(top, 0)]
