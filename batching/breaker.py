"""A circuit breaker per endpoint and a retry budget per replica set (Envoy's circuit breaking): pay no timeout per
recall while a server is down, rerank through one that fails now and then, never multiply a struggling one's load.
Every attempt goes through ``attempt``, whose ``Permit`` reports its outcome once (docs/failure-behaviour.md)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

from ..core import deadline as clock
from ..core.errors import (
    KEY_REFUSAL_STATUSES,
    BreakerOpen,
    ConfigError,
    DeadlineExceeded,
    DetectionFailed,
    InputTooLong,
    RateLimited,
    ServerError,
    StaleConnection,
    TooManyTexts,
    TransportError,
)
from ..core.statistics import RecentCounts

State = Literal["closed", "open", "half_open"]
Health = Literal["success", "down", "failure", "neutral"]


def health_of(exc: BaseException) -> Health:
    """``down``: not there or not answering; ``failure``: answered badly; ``neutral``: says nothing of it."""
    if isinstance(exc, StaleConnection | RateLimited | InputTooLong | TooManyTexts | ConfigError):
        return "neutral"
    if isinstance(exc, TransportError | DeadlineExceeded | DetectionFailed):
        return "down"
    if isinstance(exc, ServerError) and exc.status in KEY_REFUSAL_STATUSES:
        return "down"  # as while detecting (``KeyRefused``): three in a row open the breaker
    return "failure"


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    consecutive: int = 3
    failure_rate: float = 0.5
    window: int = 50
    min_samples: int = 20
    cooldown: float = 15.0
    probes: int = 2


@dataclass(eq=False, slots=True)
class Permit:
    """One attempt's admission; report its outcome once (later reports are ignored)."""

    _breaker: CircuitBreaker
    _epoch: int
    probe: bool
    admitted_at: float
    on_cancel: Callable[[], Health] = lambda: "neutral"
    timeout_health: Health = "down"
    _settled: bool = field(default=False, init=False)

    def report(self, health: Health) -> None:
        if not self._settled:
            self._settled = True
            self._breaker._settle(self, health)

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.report("success" if exc is None else self.verdict(exc))

    def verdict(self, exc: BaseException) -> Health:
        """What this attempt ending in ``exc`` says about the server: the breaker hears it, and the balancer too."""
        if isinstance(exc, asyncio.CancelledError):
            return self.on_cancel()
        if isinstance(exc, DeadlineExceeded):
            return self.timeout_health
        return health_of(exc)


class CircuitBreaker:
    """Opens after ``consecutive`` ``down`` failures in a row or at ``failure_rate`` of the last ``window`` attempts;
    open, refuses until ``cooldown``; half-open, admits ``probes`` attempts, closing once that many succeed."""

    def __init__(self, policy: BreakerPolicy = BreakerPolicy(), *, clock: Callable[[], float] = clock.now,
                 on_open: Callable[[], None] | None = None) -> None:
        self.policy = policy
        self._clock = clock
        self._on_open = on_open
        self._state: State = "closed"
        self._epoch = 0
        self._opened_at = 0.0
        self._consecutive = self._probes_out = self._probe_successes = 0
        self._recent: deque[bool] = deque(maxlen=policy.window)  # True: the attempt failed
        self._last_success = float("-inf")

    @property
    def state(self) -> State:
        return self._state_at(self._clock())

    @property
    def clean(self) -> bool:
        """Closed with no failure counted: forgetting it loses nothing (the registry's test)."""
        return self._state == "closed" and not self._consecutive and not any(self._recent)

    def would_admit(self) -> bool:
        """Whether an attempt would be admitted now, without taking anything (a fast refusal for callers)."""
        state = self._state_at(self._clock())
        return state == "closed" or (state == "half_open" and self._probe_room())

    def attempt(self) -> Permit:
        permit = self.admit()
        if permit is None:
            raise BreakerOpen("the reranker failed repeatedly; skipping it until the breaker's next probe")
        return permit

    def admit(self) -> Permit | None:
        """A permit for one attempt, or None while open. One read of the clock decides."""
        now = self._clock()
        state = self._state_at(now)
        if state == "closed":
            return Permit(self, self._epoch, False, now)
        if state == "open":
            return None
        if self._state == "open":
            self._enter("half_open")
        if not self._probe_room():
            return None
        self._probes_out += 1
        return Permit(self, self._epoch, True, now)

    def carry_over(self, previous: CircuitBreaker) -> None:
        """Made for changed settings of the same server and key: open from the instant ``previous`` opened if it
        is open or probing, so that a change of our settings opens no way to a server known to be down."""
        if previous._state != "closed":
            self._enter("open")
            self._opened_at = previous._opened_at

    def _probe_room(self) -> bool:
        return self._probes_out < self.policy.probes - self._probe_successes

    def _state_at(self, now: float) -> State:
        if self._state == "open" and now - self._opened_at >= self.policy.cooldown:
            return "half_open"
        return self._state

    def _settle(self, permit: Permit, health: Health) -> None:
        if health == "success":
            self._last_success = self._clock()
        elif health == "down" and self._last_success > permit.admitted_at:
            health = "failure"  # another request came back since this one left: the server is there
        current = permit._epoch == self._epoch
        if current and permit.probe:
            self._probes_out -= 1
        if not current or health == "neutral":
            return
        if permit.probe:
            self._probe_successes += health == "success"
            if health != "success":
                self._open()
            elif self._probe_successes >= self.policy.probes:
                self._enter("closed")
            return
        self._recent.append(health != "success")
        self._consecutive = self._consecutive + 1 if health == "down" else 0
        seen, rate = len(self._recent), self.policy.failure_rate  # a rate of 1 turns its trigger off
        if self._consecutive >= self.policy.consecutive or (
                rate < 1 and seen >= self.policy.min_samples and sum(self._recent) >= rate * seen):
            self._open()

    def _open(self) -> None:
        self._enter("open")
        self._opened_at = self._clock()
        if self._on_open is not None:
            self._on_open()

    def _enter(self, state: State) -> None:
        self._state = state
        self._epoch += 1
        self._probes_out = self._probe_successes = self._consecutive = 0
        if state == "closed":
            self._recent.clear()


class RetryBudget:
    """Retries and hedges never multiply the load on a struggling server (Finagle's and gRPC's bound): over
    ``window_s`` at most ``ratio`` times the requests first sent, or ``reserve`` (a lone recall can be retried)."""

    def __init__(self, *, ratio: float = 0.2, window_s: float = 10.0, reserve: int = 2,
                 clock: Callable[[], float] = clock.now) -> None:
        self.ratio = ratio
        self.reserve = reserve
        self._clock = clock
        self._window = RecentCounts(window_s)

    def record_request(self) -> None:  # a request went out for the first time
        self._window.add("requests", self._clock())

    def try_spend(self) -> bool:
        """Take one retry (or hedge) from the budget; False when it is spent."""
        now = self._clock()
        spent = self._window.totals(now)
        if spent["retries"] + 1 > max(self.reserve, self.ratio * spent["requests"]):
            return False
        self._window.add("retries", now)
        return True

    def refund(self) -> None:
        """Give back the last retry taken: it cost the server nothing (a stale connection's resend)."""
        self._window.take_back("retries")
