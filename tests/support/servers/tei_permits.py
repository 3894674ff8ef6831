"""TEI's concurrency permits (huggingface/text-embeddings-inference: ``core/src/infer.rs``, ``core/src/lib.rs``,
``router/src/http/server.rs``): ``--max-concurrent-requests`` (default 512) permits in one semaphore. Each text
of a rerank tries for one without waiting (``try_acquire_permit``) and holds it through its inference; a text
that gets none fails with ``Model is overloaded``, and the request, once ``join_all`` has seen its other texts
through their inference, answers 429 ``{"error": "Model is overloaded", "error_type": "Overloaded"}``."""

from __future__ import annotations

from .gate import Gate
from .monitor import StateMonitor
from .recording import RecordedRequest

OVERLOADED_MESSAGE = "Model is overloaded"  # thiserror's text of TextEmbeddingsError::Overloaded


class Permits:
    """The permits of one server, and ``inference``: a gate where texts holding permits wait while the test holds
    it (their inference), so permits stay taken for as long as the test says. ``monitor`` wakes waiters on
    ``taken`` and ``overloaded`` (429s answered) as they change."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.taken = 0
        self.overloaded = 0
        self.monitor = StateMonitor()
        self.inference = Gate(self.monitor)

    async def run(self, request: RecordedRequest, texts: int) -> bool:
        """Take a permit for each text there is one for, hold them through inference, give them back; False
        (the request is 429 Overloaded) when some text got none."""
        got = min(texts, self.total - self.taken)
        self.taken += got
        self.monitor.notify()
        try:
            if got:  # a text without a permit fails at once; those with one go through inference first
                await self.inference.passage(request)
        finally:
            self.taken -= got
            self.overloaded += got < texts
            self.monitor.notify()
        return got == texts

    async def wait_until_overloaded(self, count: int, within_s: float = 10.0) -> None:
        """Return once ``count`` requests have been answered 429 Overloaded (counted as their answer is made)."""
        await self.monitor.wait_until(lambda: self.overloaded >= count, within_s)

    async def wait_until_taken(self, count: int, within_s: float = 10.0) -> None:
        await self.monitor.wait_until(lambda: self.taken >= count, within_s)
