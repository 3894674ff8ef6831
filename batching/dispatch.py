"""The dispatch step: carry out one request (a batch of pairs) by one or more attempts.

Between the batcher and the transport. Each attempt asks the endpoint's breaker for a permit, and the
permit always hears the outcome. A failed attempt is sent again when its error allows it (see
``verdicts``), the request's deadline leaves room and the endpoint's retry budget agrees: a stale
pooled connection at once on a fresh one (not the server's fault, so not held against it), connection errors
and 502/503/504 after a jittered exponential backoff, a 429 after its Retry-After, which also holds
every other request to the endpoint back until then. With hedging on, an attempt still unanswered
after the endpoint's p95 latency (or a set delay) gets one duplicate; the first answer wins and the
other is cancelled. A request whose waiters have all gone is dropped before any attempt.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.dialects import ScoreBatch
from ..core.errors import BreakerOpen, MalformedAnswer, RateLimited, RerankError
from ..core.statistics import StatsRecorder
from .breaker import Permit
from .endpoint_state import EndpointState
from .hedging import race
from .verdicts import RetryKind, health_of, retry_kind

# send(batch, deadline, fresh): one HTTP exchange; ``fresh`` asks for a new connection (after a stale one)
SendFn = Callable[[ScoreBatch, float, bool], Awaitable[list[float]]]


class Request(Protocol):
    """What the dispatch step needs of a request; the batcher's ``Plan`` is one."""

    batch: ScoreBatch
    retries: int
    abandoned_at_deadline: bool
    fresh: bool  # the next attempt goes out on a new connection

    @property
    def deadline(self) -> float: ...

    @property
    def has_waiters(self) -> bool: ...


@dataclass(frozen=True, kw_only=True)
class DispatchPolicy:
    max_retries: int = 2
    stale_retries: int = 1  # the retry after a stale pooled connection goes out on a fresh one
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 1.0
    hedge: bool = False
    hedge_delay_s: float | None = None  # None: the endpoint's observed p95
    hedge_floor_s: float = 0.05
    hedge_percentile: float = 0.95
    hedges: int = 2  # duplicates per attempt: one after the delay, one more if that one fails


class Dispatch:
    """Carries out requests to one route of one endpoint; lives on the owner loop."""

    def __init__(self, send: SendFn, endpoint: EndpointState, stats: StatsRecorder,
                 policy: DispatchPolicy = DispatchPolicy(), rng: random.Random | None = None) -> None:
        self._send = send
        self._endpoint = endpoint
        self._stats = stats
        self.policy = policy
        self._rng = rng or random.Random()

    async def carry_out(self, request: Request) -> list[float] | None:
        """The scores, or None when every waiter left first. Raises the error that ended the request."""
        self._endpoint.budget.record_request()
        stale = 0
        last_error: RerankError | None = None
        request.fresh = False
        while request.has_waiters:
            await self._wait_for_rate_limit(request)
            permit = self._endpoint.breaker.admit()
            if permit is None:
                raise last_error or BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's probe")
            try:
                scores = await self._attempt_maybe_hedged(request, permit)
            except RerankError as exc:
                last_error = exc
                kind = retry_kind(exc)
                if kind == "now" and stale < self.policy.stale_retries and self._spend_budget():
                    stale += 1
                    request.fresh = True
                    self._stats.retried("stale_connection")
                    continue
                delay = self._retry_delay(kind, request)
                if delay is None:
                    raise
                request.retries += 1
                self._stats.retried(kind)
                await asyncio.sleep(delay)
            else:
                if request.fresh and request.retries == 0:
                    self._endpoint.budget.refund()  # the stale resend cost the server nothing after all
                return scores
        return None

    # --- one attempt ----------------------------------------------------------------------------

    async def _attempt(self, request: Request, permit: Permit) -> list[float]:
        batch = request.batch
        self._stats.request_sent(len(batch))
        started = time.monotonic()
        try:
            scores = await self._send(batch, request.deadline, request.fresh)
            if len(scores) != len(batch):
                raise MalformedAnswer(f"expected {len(batch)} scores, got {len(scores)}")
        except asyncio.CancelledError:
            permit.report("down" if request.abandoned_at_deadline else "neutral")
            raise
        except RerankError as exc:
            permit.report(health_of(exc))
            if isinstance(exc, RateLimited):
                self._hold_off_after(exc)
            raise
        except Exception as exc:  # a bug in building or parsing: a failed attempt, never a stranded request
            permit.report("failure")
            raise RerankError(f"unexpected error: {exc!r}") from exc
        permit.report("success")
        self._endpoint.latency.record(time.monotonic() - started)
        return scores

    def _hold_off_after(self, exc: RateLimited) -> None:
        wait = exc.retry_after if exc.retry_after is not None else self._backoff(0)
        self._endpoint.hold_off(time.monotonic() + wait)

    # --- retries --------------------------------------------------------------------------------

    def _retry_delay(self, kind: RetryKind, request: Request) -> float | None:
        """How long to wait before sending again, or None to give up now."""
        if kind in ("never", "now") or request.retries >= self.policy.max_retries:
            return None
        now = time.monotonic()
        if kind == "retry_after":
            delay = 0.0  # the next attempt waits the Retry-After out first
            wait = self._endpoint.not_before - now
        else:
            delay = wait = self._backoff(request.retries)
        if now + wait >= request.deadline or not self._spend_budget():
            return None
        return delay

    def _spend_budget(self) -> bool:
        if self._endpoint.budget.try_spend():
            return True
        self._stats.retry_budget_exhausted()
        return False

    def _backoff(self, retries: int) -> float:
        """Exponential with equal jitter: half fixed, half random, so retries spread out but still wait."""
        ceiling = min(self.policy.backoff_cap_s, self.policy.backoff_base_s * (2 ** retries))
        return ceiling / 2 + self._rng.uniform(0.0, ceiling / 2)

    async def _wait_for_rate_limit(self, request: Request) -> None:
        if await self._endpoint.wait_out_retry_after(request.deadline):
            self._stats.rate_limit_wait()

    # --- hedging --------------------------------------------------------------------------------

    def _hedge_delay(self) -> float | None:
        if not self.policy.hedge:
            return None
        delay = self.policy.hedge_delay_s
        if delay is None:
            delay = self._endpoint.latency.percentile(self.policy.hedge_percentile)
        return None if delay is None else max(delay, self.policy.hedge_floor_s)

    async def _attempt_maybe_hedged(self, request: Request, permit: Permit) -> list[float]:
        delay = self._hedge_delay()
        if delay is None or time.monotonic() + delay >= request.deadline:
            return await self._attempt(request, permit)
        first = asyncio.create_task(self._attempt(request, permit))
        first.add_done_callback(lambda task: permit.report("neutral") if task.cancelled() else None)

        def start_hedge() -> asyncio.Task[list[float]] | None:
            if not request.has_waiters or not self._spend_budget():
                return None
            return asyncio.create_task(self._hedge(request))

        return await race(first, start_hedge, delay=delay, hedges=self.policy.hedges)

    async def _hedge(self, request: Request) -> list[float]:
        """The duplicate: the next free slot (ahead of new batches), its own permit, one attempt."""
        limiter = self._endpoint.limiter
        await limiter.acquire(priority=True)
        try:
            permit = self._endpoint.breaker.admit()
            if permit is None or not request.has_waiters:
                if permit is not None:
                    permit.report("neutral")
                raise BreakerOpen("no hedge: the breaker refused it")
            self._stats.hedged()
            return await self._attempt(request, permit)
        finally:
            limiter.release()
