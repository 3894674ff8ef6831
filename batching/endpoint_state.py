"""A replica, and what the dispatch step keeps per endpoint (base URL and API key): slots, breaker, a 429's hold,
load and pace, on which the overload rules rest: shed a recall that cannot be answered in time, send no request
nobody can wait for, blame a timeout only when the server had a fair chance (docs/overload.md)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from ..core import deadline as clock
from ..core.dialects import ScoreBatch
from ..core.errors import RateLimited
from .breaker import CircuitBreaker, Health
from .queue import EndpointLimiter, PendingQueue

EWMA_WEIGHT: Final = 0.3  # of the newest answer: a replica that slows down is noticed within a few requests
FAILURE_HALF_LIFE_S: Final = 5.0  # a replica's recent failures weigh half as much this much later
SPEED_HALF_LIFE_S: Final = 5.0  # a replica not asked for this long looks twice as fast as it last was
WARM_UP_ANSWERS: Final = 5  # a replica's first answers (a cold start among them) do not count against it
PIPELINE_DEPTH: Final = 2  # in flight to keep a GPU busy through our turnaround (at 1, 3 replicas idled 25%)
FAILURE_WEIGHT: Final = 20.0  # a replica failing every request looks 21 times as costly to the balancer
FAILING_ABOVE: Final = 0.1  # a failure score above this (one failure, for about 8 s) keeps shares away
DECAY: Final = 0.8  # the weight an answer keeps when the next one comes: about the last five count
LONG_DECAY: Final = 0.97  # the same for the longer view: about the last thirty
FADE_HALF_LIFE_S: Final = 5.0
SPREAD: Final = 0.25  # request sizes must vary by this much (relative) before a line is drawn through them
ADMIT_MARGIN: Final = 1.05  # the expected wait, stretched by this, must fit in the time left ...
ADMIT_SLACK_S: Final = 0.01  # ... with this to spare for the answer's way back to the caller
SEND_MARGIN: Final = 1.1  # a request is sent for a recall only with this much of its expected latency left
SEND_SLACK_S: Final = 0.005
FAIR_CHANCE: Final = 2.0
MIN_SECONDS_PER_PAIR: Final = 1e-6  # a rate from answers that came all at once is not infinite


@dataclass(frozen=True)
class ServiceCost:
    """What one request costs the server: ``fixed_s`` plus ``per_pair_s`` a pair."""

    fixed_s: float
    per_pair_s: float


class ServiceRate:
    """How fast one server gets through our pairs (service intervals, not the wait behind our own), over the last few
    answers and few dozen; both fade toward fast while requests wait unanswered: no slow spell lasts for ever."""

    __slots__ = ("_idle_at", "_last_answer", "_long_n", "_long_t", "_n", "_nn", "_nt", "_t", "_weight")

    def __init__(self) -> None:
        self._weight = self._n = self._nn = self._t = self._nt = self._long_n = self._long_t = 0.0
        self._last_answer = float("-inf")
        self._idle_at: float | None = None  # since when nothing of ours is at the server (None: something is)

    def busy(self, busy: bool, now: float) -> None:
        """Ours went to the server, or none is left there: an idle server's silence does not fade its estimate."""
        if busy and self._idle_at is not None:
            self._last_answer += now - self._idle_at
        self._idle_at = None if busy else now

    def answered(self, pairs: int, sent_at: float, now: float) -> None:
        interval = max(0.0, now - max(sent_at, self._last_answer))
        self._weight = self._weight * DECAY + 1.0
        self._n = self._n * DECAY + pairs
        self._nn = self._nn * DECAY + pairs * pairs
        self._t = self._t * DECAY + interval
        self._nt = self._nt * DECAY + pairs * interval
        self._long_n = self._long_n * LONG_DECAY + pairs
        self._long_t = self._long_t * LONG_DECAY + interval
        self._last_answer = max(now, self._last_answer)

    def seconds_per_pair(self, now: float, *, worst: bool = False) -> float | None:
        """The faster of the recent and the longer-run figure (admitting), or the slower (``worst``: judging a
        timeout); None before an answer."""
        if not self._n:
            return None
        recent, longer = self._t / self._n, self._long_t / self._long_n
        return (max(recent, longer) if worst else min(recent, longer)) * self.fade(now)

    def cost(self, now: float) -> ServiceCost | None:
        """The fixed and per-pair cost of a request, from a weighted least-squares line through the recent answers;
        all per pair when their sizes hardly vary or the line would have a negative part. None before an answer."""
        if not self._n:
            return None
        fade = self.fade(now)
        per_pair = self._t / self._n * fade
        mean_n, mean_t = self._n / self._weight, self._t / self._weight
        variance = self._nn / self._weight - mean_n * mean_n
        slope = (self._nt / self._weight - mean_n * mean_t) / variance if variance > (SPREAD * mean_n) ** 2 else 0.0
        fixed = mean_t - slope * mean_n
        if slope <= 0 or fixed < 0:
            return ServiceCost(0.0, per_pair)
        return ServiceCost(fixed * fade, slope * fade)

    def fade(self, now: float) -> float:
        """Halves for each ``FADE_HALF_LIFE_S`` of silence while ours waited at the server (idle time aside)."""
        silent = (now if self._idle_at is None else self._idle_at) - self._last_answer
        return 0.5 ** (max(0.0, silent) / FADE_HALF_LIFE_S)


@dataclass(eq=False)
class EndpointState:
    """Changed only by its own methods, which the dispatch step calls as requests go and come."""

    limiter: EndpointLimiter
    breaker: CircuitBreaker
    not_before: float = 0.0  # monotonic seconds; set from a 429's Retry-After, or growing without one
    rate_limits: int = 0  # 429s without Retry-After in a row, ended by an answer to a request sent after them
    rate_limited_at: float = float("-inf")  # when the last of them counted: one sent by then is of its burst
    overload_until: float = float("-inf")  # a hold to here (an overloaded server's 429) ends with our next answer
    _answer: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # set and cleared at each answer
    outstanding_pairs: int = 0
    outstanding_requests: int = 0  # sent, not yet answered (``outstanding_pairs`` is their pairs)
    busy_since: float = 0.0  # when the requests now in flight began to go out (the first of them)
    # None: never measured. A ratio of decayed sums, not an average of ratios: a small request's fixed
    # cost would otherwise make its replica look slow per pair, and a burst shared out leave it short.
    seconds_per_pair: float | None = None
    pairs_sent: int = 0
    answers: int = 0
    failure_score: float = 0.0  # EWMA of recent attempts' failures (1) and successes (0)
    failure_at: float = 0.0  # when ``failure_score`` was last raised
    answered_at: float = 0.0  # when the speed was last measured
    service: ServiceRate = field(default_factory=ServiceRate)
    queues: weakref.WeakSet[PendingQueue] = field(default_factory=weakref.WeakSet, repr=False)
    _latency_sum: float = field(default=0.0, repr=False)  # decayed sums behind ``seconds_per_pair``
    _pairs_sum: float = field(default=0.0, repr=False)

    def queued_by(self, queue: PendingQueue) -> None:
        """A batcher queues for this server (one per agent settings): the others' admissions count it too."""
        self.queues.add(queue)

    def hold_off(self, until: float) -> None:  # a later Retry-After only extends the hold
        self.not_before = max(self.not_before, until)

    def hold_off_growing(self, sent_at: float, hold_for: Callable[[int], float], *, until_answer: bool = False) -> None:
        """A 429 without Retry-After: held back ``hold_for(429s in a row)``, or (``until_answer``) to our next answer.
        One to a request sent before the last came back is of the same burst (over the limit together), not one more."""
        now = clock.now()
        if sent_at > self.rate_limited_at:
            self.rate_limits, self.rate_limited_at = self.rate_limits + 1, now
        self.hold_off(until := now + hold_for(self.rate_limits))
        if until_answer:
            self.overload_until = max(self.overload_until, until)

    def answered_within_limit(self, sent_at: float) -> None:
        """A recall's or detection's answer: sent after the last 429, the key is back under its limit."""
        if sent_at > self.rate_limited_at:
            self.rate_limits = 0

    def carry_over(self, previous: EndpointState) -> None:
        """Made for changed settings of the same server and key: what the server said of itself still holds (its
        Retry-After, its 429s in a row, its breaker open); our own measures (slots, speed) start afresh."""
        self.hold_off(previous.not_before)
        self.overload_until = previous.overload_until  # an overloaded server's hold still ends at our next answer
        self.rate_limits, self.rate_limited_at = previous.rate_limits, previous.rate_limited_at
        self.breaker.carry_over(previous.breaker)

    def rate_limited(self) -> bool:
        return self.not_before > clock.now()

    async def wait_out_retry_after(self, deadline: float) -> bool:
        """Wait out a Retry-After (or a hold made longer meanwhile) while the deadline allows it (True when it waited),
        else raise ``RateLimited``. A hold ``until_answer`` ends early at our next answer from the server."""
        waited = False
        while (wait := self.not_before - clock.now()) > 0:
            if self.not_before >= deadline:
                said = f"{wait:.0f}" if wait >= 10 else f"{wait:.1f}"  # "120 s", not the "119.99 s" left of it now
                raise RateLimited(429, f"the server asked to wait {said} s more (Retry-After)", retry_after=wait)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answer.wait(), wait)
            waited = True
        return waited

    def answered(self, seconds: float, pairs: int, sent_at: float | None = None) -> None:
        if sent_at is None:
            sent_at = clock.now() - seconds
        self._latency_sum = self._latency_sum * (1 - EWMA_WEIGHT) + seconds
        self._pairs_sum = self._pairs_sum * (1 - EWMA_WEIGHT) + max(pairs, 1)
        self.seconds_per_pair = self._latency_sum / self._pairs_sum
        self.failure_score -= EWMA_WEIGHT * self.failure_score
        self.answered_within_limit(sent_at)
        self.answered_at = sent_at + seconds
        self.service.answered(pairs, sent_at, self.answered_at)
        self.answers += 1
        if self.not_before <= self.overload_until:  # its permits came back: room again, and the streak is over
            self.not_before, self.rate_limits = min(self.not_before, clock.now()), 0
        self._answer.set()  # wakes whoever waits out a hold (now over, or not)
        self._answer.clear()

    def begin_request(self, pairs: int, now: float) -> None:
        """A request goes out: in flight until ``end_request`` (however it ends), counted as sent."""
        if not self.outstanding_requests:
            self.busy_since = now
            self.service.busy(True, now)
        self.outstanding_requests += 1
        self.outstanding_pairs += pairs
        self.pairs_sent += pairs

    def end_request(self, pairs: int) -> None:
        self.outstanding_requests -= 1
        self.outstanding_pairs -= pairs
        if not self.outstanding_requests:
            self.service.busy(False, clock.now())

    def busy_for(self, fixed_s: float, per_pair_s: float, now: float) -> float:
        """How much longer what is in flight should keep the server busy, served one after another."""
        work = fixed_s * self.outstanding_requests + per_pair_s * self.outstanding_pairs
        return max(0.0, work - (now - self.busy_since)) if self.outstanding_requests else 0.0

    def expected_latency(self, pairs: int, now: float, *, worst: bool = False) -> float | None:
        """How long ``pairs`` sent now should take: the shorter (``worst``: the longer, at the slower pace) of behind
        those in flight at the server's pace (one pass at a time) and at its answers' latency per pair (side by side).
        Both fade while unanswered (``worst`` too: a slow spell before a hang must not excuse its timeouts)."""
        per_pair = self.service.seconds_per_pair(now, worst=worst)
        if per_pair is None:
            return None
        readings = [(self.outstanding_pairs + pairs) * per_pair]
        if self.seconds_per_pair is not None:
            readings.append(self.seconds_per_pair * pairs * (self.service.fade(now) if worst else 1.0))
        return max(readings) if worst else min(readings)

    def failed(self) -> None:
        """An attempt failed here (its verdict ``down`` or ``failure``)."""
        recent = self.recent_failures()
        self.failure_score = recent + EWMA_WEIGHT * (1.0 - recent)
        self.failure_at = clock.now()

    def recent_failures(self) -> float:
        """The failure score, fading with time: a replica that failed a while ago gets tried again."""
        if not self.failure_score:
            return 0.0
        return self.failure_score * 0.5 ** ((clock.now() - self.failure_at) / FAILURE_HALF_LIFE_S)

    def seconds_per_pair_now(self) -> float | None:
        """The measured speed, fading while not asked (one slow answer must not keep it out); None while warming up."""
        if self.answers < WARM_UP_ANSWERS or not self.seconds_per_pair:
            return None
        return self.seconds_per_pair * 0.5 ** ((clock.now() - self.answered_at) / SPEED_HALF_LIFE_S)

    def cost(self, unmeasured_seconds_per_pair: float = 0.0) -> float:
        """The balancer's cost of one more request: speed times load, raised by recent failures (so a failing replica
        is left alone before its breaker opens)."""
        speed = (self.seconds_per_pair_now() or unmeasured_seconds_per_pair) + 1e-9  # load counts when none is known
        return speed * (self.outstanding_pairs + 1) * self.failure_factor()

    def failure_factor(self) -> float:
        return 1.0 + FAILURE_WEIGHT * self.recent_failures()

    @property
    def idle(self) -> bool:
        return self.limiter.in_flight == 0

    @property
    def forgettable(self) -> bool:
        """Nothing in flight and nothing learned that a later recall would miss (its speed fades anyway)."""
        return (self.idle and self.breaker.clean and not self.rate_limited() and not self.rate_limits
                and self.recent_failures() < FAILING_ABOVE)

    @property
    def short_of_work(self) -> bool:
        """Its GPU would wait once its pass ends; one that failed lately is failing, not short of work."""
        return self.limiter.in_flight < PIPELINE_DEPTH and self.recent_failures() < FAILING_ABOVE


def admits(expected_wait: float | None, remaining: float) -> bool:
    """Whether a recall answered after ``expected_wait`` (None: no estimate, nothing ahead) fits in ``remaining``."""
    return expected_wait is None or expected_wait * ADMIT_MARGIN + ADMIT_SLACK_S <= remaining


def worth_sending(expected_latency: float | None, remaining: float) -> bool:
    """Whether a request expected to take ``expected_latency`` can still be answered in ``remaining``."""
    return expected_latency is None or expected_latency * SEND_MARGIN + SEND_SLACK_S <= remaining


def timeout_health(expected_latency: float | None, remaining: float) -> Health:
    """What a timeout of a request sent with ``remaining`` seconds left says about the server."""
    if expected_latency is None or remaining >= FAIR_CHANCE * expected_latency:
        return "down"
    return "neutral"


def shed_message(expected_wait: float, remaining: float) -> str:
    return (f"the reranker is overloaded: this recall would wait about {expected_wait:.2f} s for an answer "
            f"and had {max(remaining, 0.0):.2f} s left")


# send(batch, deadline, may_resend): one HTTP exchange; ``may_resend()``: may it go again on a fresh connection
SendFn = Callable[[ScoreBatch, float, Callable[[], bool]], Awaitable[list[float]]]


@dataclass(eq=False)
class Replica:
    """One server of a set: where it is, its dispatch state, and how to send it a batch."""

    url: str
    state: EndpointState
    send: SendFn
