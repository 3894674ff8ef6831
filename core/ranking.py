"""Ranking math and input limits: pure functions the service and the A0 layer share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

# One retry after "input too long" uses cuts that fit a 512-token cross-encoder with room to spare.
RETRY_QUERY_CHARS: Final = 500
RETRY_DOC_CHARS: Final = 1200


def ranked(scores: Sequence[float]) -> list[tuple[int, float]]:
    """``(original_index, score)`` best-first; equal scores keep their original order."""
    return sorted(enumerate(scores), key=lambda item: (-item[1], item[0]))


def cut_head(text: str, max_chars: int) -> str:
    """Keep the first ``max_chars`` characters: A0 puts the user's message at the head of the query."""
    return text if len(text) <= max_chars else text[:max_chars]


def tighter_limits(max_query_chars: int, max_doc_chars: int) -> tuple[int, int]:
    """The cuts of the one retry after a server said the input is too long."""
    return min(max_query_chars, RETRY_QUERY_CHARS), min(max_doc_chars, RETRY_DOC_CHARS)


@dataclass(frozen=True)
class OrderChange:
    """How reranking changed the top of a recall: what shadow mode reports."""

    limit: int
    kept: int  # memories in both the stock and the reranked top-``limit``
    mean_displacement: float  # mean |stock position - reranked position| over the reranked top-``limit``

    @property
    def replaced(self) -> int:
        return self.limit - self.kept


def order_change(reranked_indices: Sequence[int], limit: int) -> OrderChange:
    """Compare the reranked order (indices into the stock order) with the stock order, over ``limit``."""
    top = list(reranked_indices[:limit])
    if not top:
        return OrderChange(limit=0, kept=0, mean_displacement=0.0)
    kept = sum(1 for index in top if index < limit)
    displacement = sum(abs(index - position) for position, index in enumerate(top)) / len(top)
    return OrderChange(limit=len(top), kept=kept, mean_displacement=displacement)
