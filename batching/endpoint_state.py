"""Everything the dispatch step keeps per endpoint (one server: base URL and API key): its concurrency
slots, breaker, the time before which a 429 asked us not to send, the load and speed the balancer
reads (pairs in flight, seconds per pair as an exponentially weighted moving average), and the rate
at which it serves pairs, which shedding and the breaker's fair-chance rule read (``overload``).

Each slot taken is a ``Lease`` that knows its holder: the limiter keeps the leases it has out, and
giving back one it does not hold (twice, or another limiter's) raises ``SlotNotHeld`` instead of
silently freeing a slot someone else holds (as anyio's ``CapacityLimiter`` does). The dispatcher takes
a lease, then hands it to the request it starts (``hand_to``), whose task gives it back in a done
callback: that runs even when the task is cancelled before its first step, where a ``finally`` inside
the coroutine would not. A hedge or a failover asks with priority: the next free slot is its.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from ..core import deadline as clock
from ..core.errors import RateLimited
from .breaker import CircuitBreaker
from .overload import ServiceRate

EWMA_WEIGHT: Final = 0.3  # of the newest answer: a replica that slows down is noticed within a few requests
FAILURE_HALF_LIFE_S: Final = 5.0  # a replica's recent failures weigh half as much this much later
SPEED_HALF_LIFE_S: Final = 5.0  # a replica not asked for this long looks twice as fast as it last was
WARM_UP_ANSWERS: Final = 5  # a replica's first answers (a cold start among them) do not count against it
PIPELINE_DEPTH: Final = 2  # requests in flight that keep a replica's GPU busy through the client's turnaround
FAILURE_WEIGHT: Final = 20.0  # a replica failing every request looks 21 times as costly to the balancer
FAILING_ABOVE: Final = 0.1  # a failure score above this (one failure, for about 8 s) keeps shares away


class SlotNotHeld(RuntimeError):
    """A lease was given back that the limiter does not hold: a bug in whoever gave it back."""


class Lease:
    """One slot of one limiter, held by ``holder`` until given back."""

    __slots__ = ("_limiter", "holder")

    def __init__(self, limiter: EndpointLimiter, holder: object) -> None:
        self._limiter = limiter
        self.holder = holder

    @property
    def held(self) -> bool:
        return self in self._limiter._leases

    def hand_to(self, holder: object) -> Lease:
        """The same slot, now held by ``holder``."""
        if not self.held:
            raise SlotNotHeld(f"cannot hand over a slot that is not held (held by a {type(self.holder).__name__})")
        self.holder = holder
        return self

    def release(self) -> None:
        self._limiter.release(self)


class EndpointLimiter:
    """At most ``capacity`` requests in flight to one endpoint; ``in_flight`` is the leases out."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._leases: set[Lease] = set()
        self._waiters: deque[tuple[asyncio.Future[None], Lease]] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    @property
    def capacity(self) -> int:
        return self._capacity

    def has_room(self) -> bool:
        """A slot is free and nobody queued before us wants it."""
        return self.in_flight < self._capacity and all(w.done() for w, _ in self._waiters)

    def take(self, holder: object) -> Lease:
        """A slot at once, for ``holder`` (the caller has checked ``has_room``, or must have one)."""
        lease = Lease(self, holder)
        self._leases.add(lease)
        return lease

    async def acquire(self, holder: object, *, priority: bool = False) -> Lease:
        """Wait for a slot and take it for ``holder``. Cancelled while waiting it takes nothing, also
        when a slot was handed over in the same instant."""
        if self.has_room():
            return self.take(holder)
        waiter = asyncio.get_running_loop().create_future()
        entry = (waiter, Lease(self, holder))
        (self._waiters.appendleft if priority else self._waiters.append)(entry)
        try:
            await waiter  # resolved only together with taking the slot for us (see release)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                entry[1].release()  # granted as we were cancelled: give it back
            raise
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
        return entry[1]

    def release(self, lease: Lease) -> None:
        """Give ``lease`` back and hand free slots to the waiters in order, each taken in the same step."""
        if lease not in self._leases:
            raise SlotNotHeld(f"a slot was given back that is not held (by a {type(lease.holder).__name__})")
        self._leases.remove(lease)
        while self._waiters and self.in_flight < self._capacity:
            waiter, granted = self._waiters.popleft()
            if not waiter.done():
                self._leases.add(granted)
                waiter.set_result(None)


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


def _ewma(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + EWMA_WEIGHT * (sample - previous)
