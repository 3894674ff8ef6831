"""The demo server's scorer: word overlap, a stand-in for a cross-encoder (not a model).

The score is the share of the query's content words found in the document (stop words ignored, crude
stemming), plus a bonus for query word pairs that also stand side by side in the document. Unlike the
bag-of-words cosine it ignores filler words and does not punish long documents, which is enough to
show what reranking does; a real cross-encoder reads meaning, negation and entities.
"""

from __future__ import annotations

from itertools import pairwise

from .words import content_stems

PAIR_WEIGHT = 0.25


def word_overlap_score(query: str, document: str) -> float:
    """Relevance in [0, 1]: 1.0 when every content word of the query appears, in the same pairs."""
    wanted = content_stems(query)
    if not wanted:
        return 0.0
    found = content_stems(document)
    coverage = len(set(wanted) & set(found)) / len(set(wanted))
    query_pairs = set(pairwise(wanted))
    if not query_pairs:
        return coverage
    document_pairs = {frozenset(pair) for pair in pairwise(found)}
    pairs = sum(1 for pair in query_pairs if frozenset(pair) in document_pairs) / len(query_pairs)
    return (1 - PAIR_WEIGHT) * coverage + PAIR_WEIGHT * pairs
