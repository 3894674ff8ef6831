"""Stand-in for `faiss` (faiss-cpu 1.11): only `IndexFlatIP`, exact inner-product search.

Vectors are kept sparse (non-zero entries) so a pure-Python brute-force search stays fast. Results
are sorted by score descending, ties by insertion order; missing slots are `-1` as in faiss.
"""

from __future__ import annotations

from collections.abc import Sequence

Vector = Sequence[float]


class IndexFlatIP:
    def __init__(self, d: int) -> None:
        self.d = d
        self._vectors: list[list[tuple[int, float]]] = []

    @property
    def ntotal(self) -> int:
        return len(self._vectors)

    def add(self, x: Sequence[Vector]) -> None:
        for row in x:
            if len(row) != self.d:
                raise ValueError(f"vector of dimension {len(row)} added to an index of dimension {self.d}")
            self._vectors.append([(i, float(v)) for i, v in enumerate(row) if v])

    def search(self, x: Sequence[Vector], k: int) -> tuple[list[list[float]], list[list[int]]]:
        all_scores: list[list[float]] = []
        all_ids: list[list[int]] = []
        for query in x:
            scored = sorted(
                ((sum(v * query[i] for i, v in vec), n) for n, vec in enumerate(self._vectors)),
                key=lambda pair: (-pair[0], pair[1]),
            )[:k]
            pad = k - len(scored)
            all_scores.append([s for s, _ in scored] + [float("-inf")] * pad)
            all_ids.append([n for _, n in scored] + [-1] * pad)
        return all_scores, all_ids

    def remove_ids(self, ids: Sequence[int]) -> int:
        doomed = set(int(i) for i in ids)
        before = len(self._vectors)
        self._vectors = [v for n, v in enumerate(self._vectors) if n not in doomed]
        return before - len(self._vectors)

    def reconstruct(self, key: int) -> list[float]:
        dense = [0.0] * self.d
        for i, v in self._vectors[key]:
            dense[i] = v
        return dense
