"""Everything the dispatch step keeps per endpoint (one server: base URL and API key): its concurrency
slots (a ``queue.EndpointLimiter``), breaker, the time before which a 429 asked us not to send, the
load and speed the balancer reads (pairs in flight, seconds per pair as an exponentially weighted
moving average), and the pace at which it serves pairs (``ServiceRate``).

On that pace, the overload rules: a recall the servers cannot answer before its deadline is shed at
once (``admits``), a request nobody can wait for any more is not sent (``worth_sending``), and a
timeout counts against the server only when the request had a fair chance (``timeout_health``). A
healthy server asked for more than it can serve is the normal case under multi-agent load, not a
fault. Why each rule, and what they measured: docs/overload.md.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final

from ..core import deadline as clock
from ..core.errors import RateLimited
from .breaker import CircuitBreaker, Health
from .queue import EndpointLimiter

EWMA_WEIGHT: Final = 0.3  # of the newest answer: a replica that slows down is noticed within a few requests
FAILURE_HALF_LIFE_S: Final = 5.0  # a replica's recent failures weigh half as much this much later
SPEED_HALF_LIFE_S: Final = 5.0  # a replica not asked for this long looks twice as fast as it last was
WARM_UP_ANSWERS: Final = 5  # a replica's first answers (a cold start among them) do not count against it
PIPELINE_DEPTH: Final = 2  # requests in flight that keep a replica's GPU busy through the client's turnaround
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


@dataclass(frozen=True)
class ServiceCost:
    """What one request costs the server: ``fixed_s`` plus ``per_pair_s`` a pair."""

    fixed_s: float
    per_pair_s: float

    def of(self, pairs: float) -> float:
        return self.fixed_s + self.per_pair_s * pairs


class ServiceRate:
    """How fast one server gets through our pairs; owned by one ``EndpointState``, written when its
    requests are answered. Each answer adds its pairs and its service interval, from when it was sent or
    from the previous answer if that came later: while our requests queue at a server that serves a
    pass at a time, that is its pass without the wait behind the one before (while it idles, a whole
    latency: the estimate errs slow); a server serving side by side answers several in one interval.
    Kept over the last few answers and the last few dozen, as a spell of hung requests makes the recent
    figure slow for a second: admitting, the faster counts; judging a timeout, the slower (the benefit
    of the doubt). Without answers both fade toward fast, so no slow spell keeps recalls away for ever."""

    __slots__ = ("_last_answer", "_long_n", "_long_t", "_n", "_nn", "_nt", "_t", "_weight")

    def __init__(self) -> None:
        self._weight = self._n = self._nn = self._t = self._nt = self._long_n = self._long_t = 0.0
        self._last_answer = float("-inf")

    def answered(self, pairs: int, sent_at: float, now: float) -> None:
        """A request of ``pairs`` pairs sent at ``sent_at`` was answered at ``now``."""
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
        """The faster of the recent and the longer-run figure (``worst``: the slower); None until the
        first answer."""
        if not self._n:
            return None
        recent, longer = self._t / self._n, self._long_t / self._long_n
        return (max(recent, longer) if worst else min(recent, longer)) * self._fade(now)

    def cost(self, now: float) -> ServiceCost | None:
        """The fixed and per-pair cost of a request, from a line through the recent answers (least
        squares, weighted as the sums decay); all per pair when their sizes hardly vary, or when the
        line would have a negative part. None until the first answer."""
        if not self._n:
            return None
        fade = self._fade(now)
        per_pair = self._t / self._n * fade
        mean_n, mean_t = self._n / self._weight, self._t / self._weight
        variance = self._nn / self._weight - mean_n * mean_n
        slope = (self._nt / self._weight - mean_n * mean_t) / variance if variance > (SPREAD * mean_n) ** 2 else 0.0
        fixed = mean_t - slope * mean_n
        if slope <= 0 or fixed < 0:
            return ServiceCost(0.0, per_pair)
        return ServiceCost(fixed * fade, slope * fade)

    def _fade(self, now: float) -> float:
        return 0.5 ** (max(0.0, now - self._last_answer) / FADE_HALF_LIFE_S)


@dataclass(eq=False)
class EndpointState:
    limiter: EndpointLimiter
    breaker: CircuitBreaker
    not_before: float = 0.0  # monotonic seconds; set from a 429's Retry-After
    outstanding_pairs: int = 0
    outstanding_requests: int = 0  # sent, not yet answered (``outstanding_pairs`` is their pairs)
    busy_since: float = 0.0  # when the requests now in flight began to go out (the first of them)
    # None: never measured. A ratio of decayed sums (latency over pairs), not an average of each answer's
    # ratio: a small request's fixed cost would otherwise make its replica look slow per pair, and a
    # burst shared out after it would leave that replica short and the others finishing last.
    seconds_per_pair: float | None = None
    seconds_per_request: float | None = None
    pairs_sent: int = 0
    answers: int = 0
    failure_score: float = 0.0  # EWMA of recent attempts' failures (1) and successes (0)
    failure_at: float = 0.0  # when ``failure_score`` was last raised
    answered_at: float = 0.0  # when the speed was last measured
    service: ServiceRate = field(default_factory=ServiceRate)
    _latency_sum: float = field(default=0.0, repr=False)  # decayed sums behind ``seconds_per_pair``
    _pairs_sum: float = field(default=0.0, repr=False)

    def hold_off(self, until: float) -> None:
        """No attempt to this endpoint before ``until`` (a later Retry-After only extends it)."""
        self.not_before = max(self.not_before, until)

    def rate_limited(self) -> bool:
        return self.not_before > clock.now()

    async def wait_out_retry_after(self, deadline: float) -> bool:
        """Before any request: wait out a Retry-After when the deadline allows it (True when it
        waited), and raise ``RateLimited`` at once when it does not."""
        wait = self.not_before - clock.now()
        if wait <= 0:
            return False
        if clock.now() + wait >= deadline:
            raise RateLimited(429, f"the server asked to wait {wait:.2f} s more (Retry-After)", retry_after=wait)
        await asyncio.sleep(wait)
        return True

    def answered(self, seconds: float, pairs: int, sent_at: float | None = None) -> None:
        """A request of ``pairs`` pairs sent at ``sent_at`` (default: ``seconds`` ago) came back fine
        after ``seconds``."""
        if sent_at is None:
            sent_at = clock.now() - seconds
        self._latency_sum = self._latency_sum * (1 - EWMA_WEIGHT) + seconds
        self._pairs_sum = self._pairs_sum * (1 - EWMA_WEIGHT) + max(pairs, 1)
        self.seconds_per_pair = self._latency_sum / self._pairs_sum
        self.seconds_per_request = _ewma(self.seconds_per_request, seconds)
        self.failure_score = _ewma(self.failure_score, 0.0)
        self.answered_at = sent_at + seconds
        self.service.answered(pairs, sent_at, self.answered_at)
        self.answers += 1

    def begin_request(self, pairs: int, now: float) -> None:
        """A request of ``pairs`` pairs goes out: in flight until ``end_request``, counted as sent."""
        if not self.outstanding_requests:
            self.busy_since = now
        self.outstanding_requests += 1
        self.outstanding_pairs += pairs
        self.pairs_sent += pairs

    def end_request(self, pairs: int) -> None:
        """The request ``begin_request`` announced ended, however it ended."""
        self.outstanding_requests -= 1
        self.outstanding_pairs -= pairs

    def busy_for(self, fixed_s: float, per_pair_s: float, now: float) -> float:
        """How much longer what is in flight here should keep the server busy: its work, at a request's
        fixed cost and a pair's, less what has gone by since it began (served one after another)."""
        work = fixed_s * self.outstanding_requests + per_pair_s * self.outstanding_pairs
        return max(0.0, work - (now - self.busy_since)) if self.outstanding_requests else 0.0

    def expected_latency(self, pairs: int, now: float, *, worst: bool = False) -> float | None:
        """How long a request of ``pairs`` sent now should take, by two readings: behind the pairs in
        flight here at the pace the server serves (right for one GPU serving a pass at a time), and at
        the latency its recent answers had per pair (right for a server that serves side by side, where
        a request that hangs holds nothing up). The shorter of the two; ``worst``: the longer, each at
        the slower of the server's recent and longer-run pace. None before the first answer."""
        per_pair = self.service.seconds_per_pair(now, worst=worst)
        if per_pair is None:
            return None
        readings = [(self.outstanding_pairs + pairs) * per_pair]
        if self.seconds_per_pair is not None:
            readings.append(self.seconds_per_pair * pairs)
        return max(readings) if worst else min(readings)

    def failed(self) -> None:
        """An attempt failed here (not a 429, a stale connection or a cancellation)."""
        self.failure_score = _ewma(self.recent_failures(), 1.0)
        self.failure_at = clock.now()

    def recent_failures(self) -> float:
        """The failure score, fading with time: a replica that failed a while ago gets tried again."""
        if not self.failure_score:
            return 0.0
        return self.failure_score * 0.5 ** ((clock.now() - self.failure_at) / FAILURE_HALF_LIFE_S)

    def seconds_per_pair_now(self) -> float | None:
        """The measured speed, fading while the replica is not asked (a replica not asked for
        ``SPEED_HALF_LIFE_S`` looks twice as fast as it last was, so no one slow answer keeps it out
        of rotation); None during its first few answers, as a cold start is no measure of it."""
        if self.answers < WARM_UP_ANSWERS or not self.seconds_per_pair:
            return None
        return self.seconds_per_pair * 0.5 ** ((clock.now() - self.answered_at) / SPEED_HALF_LIFE_S)

    def cost(self, unmeasured_seconds_per_pair: float = 0.0) -> float:
        """What one more request costs here, for the balancer: its speed times its load, raised by its
        recent failures (so a failing replica is left alone before its breaker even opens). A replica
        not yet measured counts at ``unmeasured_seconds_per_pair`` (the set passes its fastest one's),
        so its load is weighed like the others' and it is never a free choice however busy it is."""
        speed = self.seconds_per_pair_now()
        if speed is None:
            speed = unmeasured_seconds_per_pair
        base = speed * (self.outstanding_pairs + 1) + 1e-9 * self.outstanding_pairs
        return (base or 1e-9) * self.failure_factor()

    def failure_factor(self) -> float:
        """How much costlier its recent failures make this replica look (1: none)."""
        return 1.0 + FAILURE_WEIGHT * self.recent_failures()

    @property
    def idle(self) -> bool:
        return self.limiter.in_flight == 0

    @property
    def forgettable(self) -> bool:
        """Nothing in flight and nothing learned that a later recall would miss: its breaker clean, no
        Retry-After pending, no recent failures (its speed fades by itself while it is not asked)."""
        return (self.idle and self.breaker.clean and not self.rate_limited()
                and self.recent_failures() < FAILING_ABOVE)

    @property
    def short_of_work(self) -> bool:
        """Fewer than ``PIPELINE_DEPTH`` requests in flight: once its current pass ends, its GPU would
        wait while the answer travels back and the next recalls come in, unless another request is
        already waiting there. (Measured: with 3 replicas and only one request each, the GPUs sat idle
        a quarter of the time; with two they stay about 90% busy.) A replica that failed lately is not
        short of work but failing: no share is pushed to it; the balancer's choice still reaches it."""
        return self.limiter.in_flight < PIPELINE_DEPTH and self.recent_failures() < FAILING_ABOVE


def admits(expected_wait: float | None, remaining: float) -> bool:
    """Whether a recall expected to be answered after ``expected_wait`` seconds (None: no estimate yet,
    or nothing ahead of it) fits in the ``remaining`` seconds before its deadline."""
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


def _ewma(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + EWMA_WEIGHT * (sample - previous)
