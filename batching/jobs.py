"""A caller's unit of work inside the batcher: one query, its documents, its deadline, its future."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import deadline as clock

if TYPE_CHECKING:
    from .plans import Plan

_job_ids = itertools.count()


@dataclass(eq=False)
class Job:
    """Scores for ``documents`` against ``query``, due by ``deadline`` (on the engine's clock, ``deadline.now``).

    ``unsent`` holds the distinct documents not yet taken into a request (only the queue changes it);
    ``targets`` maps each distinct document to every position it fills (a recall may hold the same
    text twice). ``retries`` is the most retries any request carrying its pairs needed.
    """

    query: str
    documents: Sequence[str]
    deadline: float
    future: asyncio.Future[list[float]]
    enqueued_at: float = field(default_factory=clock.now)
    id: int = field(default_factory=lambda: next(_job_ids))
    plans: set[Plan] = field(default_factory=set)
    retries: int = 0
    answered_by: str = ""  # the replica whose answer came first (its route says the API and the scale)
    failover_to: str = ""  # a replica other than the first one tried answered (a failover)
    sent: bool = False  # a request carrying some of its pairs has gone out

    def __post_init__(self) -> None:
        positions: dict[str, list[int]] = {}
        for index, doc in enumerate(self.documents):
            positions.setdefault(doc, []).append(index)
        self.targets: dict[str, list[int]] = positions
        self.unsent: list[str] = list(positions)  # distinct documents, in first-seen order
        self.scores: list[float | None] = [None] * len(self.documents)
        self.missing = len(positions)

    @property
    def done(self) -> bool:
        return self.future.done()

    def deliver(self, document: str, score: float) -> None:
        """Record the score of one distinct document; complete the future when all have arrived."""
        if self.done or document not in self.targets:
            return
        for index in self.targets.pop(document):
            self.scores[index] = score
        self.missing -= 1
        if self.missing == 0:
            self.future.set_result([s for s in self.scores if s is not None])

    def fail(self, error: BaseException) -> None:
        """Complete with an error unless already complete (the queue forgets its unsent pairs)."""
        if not self.done:
            self.future.set_exception(error)
            # The exception is always either awaited by the caller or deliberately dropped with it.
            self.future.exception()
