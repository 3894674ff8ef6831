"""The replicas one batcher's requests can go to, how one is chosen for each attempt, the retry budget
and the latency window the set keeps, and the race between an attempt and its hedges.

Power of two choices (as Finagle's and Envoy's least-request balancers do): of the replicas that can
take a request now (breaker admitting, no Retry-After pending), pick two at random and take the one
that costs less: its observed seconds per pair times its pairs in flight plus one, raised by its
recent failures. The request then waits for a slot of that replica if all are taken: the expected
wait behind a fast replica's few pairs can be shorter than a slow replica's own time. A replica not
yet measured counts as fast as the fastest one, so a new one gets traffic as soon as it is the least
loaded, and a slow or failing one gets a smaller share by itself. Each replica keeps its own
concurrency cap and breaker (its ``EndpointState``); the retry budget and the latency window that
sets the hedging delay belong to the set. With one replica all of this is that replica's slots.

The retry budget (``RetryBudget``): retries and hedges can never multiply the load on a struggling
server. Over a sliding window of ``window_s`` seconds, retries may number at most ``ratio`` times the
requests first sent in that window, or ``reserve``, whichever is more (so a lone recall can still be
retried once or twice). This is the bound Finagle's and gRPC's retry budgets give: a server failing
every request gets at most ``1 + ratio`` times the requests it would get with no retries at all, once
more than ``reserve / ratio`` requests pass in a window. Counts are kept in one-second buckets.

Hedging (``race``): one duplicate of an attempt goes out after ``delay`` without an answer (a
percentile of the set's recent answer times, ``LatencyWindow``); when a duplicate fails while the
first attempt is still out, the next one goes out at once, up to ``hedges`` in all. The first answer
wins and the others are cancelled; if every attempt fails, the first attempt's error is the request's
(so the retry rules see what the server said to it).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..core import deadline as clock
from ..core.dialects import ScoreBatch
from ..core.statistics import percentile as nearest_rank
from .endpoint_state import EndpointState, ServiceCost
from .queue import Lease

MIN_SECONDS_PER_PAIR: Final = 1e-6  # a rate from answers that came all at once is not infinite
MIN_SAMPLES: Final = 20  # fewer answers than this say nothing reliable about the tail

# send(batch, deadline, may_resend): one HTTP exchange; ``may_resend()`` says whether it may be sent once
# more, at once on a fresh connection, when the pooled one it went out on turns out stale
SendFn = Callable[[ScoreBatch, float, Callable[[], bool]], Awaitable[list[float]]]
Attempt = asyncio.Task[list[float]]


@dataclass(eq=False)
class Replica:
    """One server of the set: where it is, its dispatch state, and how to send it a batch."""

    url: str
    state: EndpointState
    send: SendFn


class ReplicaSet:
    """Use on the owner loop only. The members are fixed: routes found or lost make another set."""

    def __init__(self, replicas: Sequence[Replica], *, budget: RetryBudget, rng: random.Random | None = None
                 ) -> None:
        self.replicas: tuple[Replica, ...] = tuple(replicas)
        self.budget = budget
        self.latency = LatencyWindow()
        self._rng = rng or random.Random()

    def ready(self, exclude: Iterable[Replica] = ()) -> list[Replica]:
        """The members that could take a request now (their breaker admits, no Retry-After pending)."""
        left_out = {r.url for r in exclude}
        return [r for r in self.replicas
                if r.url not in left_out and r.state.breaker.would_admit() and not r.state.rate_limited()]

    def peers_short_of_work(self, chosen: Replica, pairs: int) -> list[Replica]:
        """The members other than ``chosen`` that are ready, short of work (see ``EndpointState``) and
        cost no more than ``chosen`` would with ``pairs`` more: a request there now beats queueing
        all of them behind ``chosen``."""
        load = chosen.state.outstanding_pairs + 1
        loaded = self.cost(chosen) * (load + pairs) / load
        return [r for r in self.ready(exclude=[chosen])
                if r.state.short_of_work and r.state.limiter.has_room() and self.cost(r) <= loaded]

    def cost(self, member: Replica) -> float:
        """The member's cost to the balancer; one not yet measured counts as fast as the fastest."""
        speeds = (s for r in self.replicas if (s := r.state.seconds_per_pair_now()) is not None)
        return member.state.cost(min(speeds, default=0.0))

    def share_costs(self, members: Sequence[Replica], now: float) -> tuple[list[float], list[float]]:
        """For sharing a queue out over ``members``: each one's seconds per pair (from the line through
        its recent answers, raised by its recent failures as its cost is) and how long it is busy before
        a new request's pairs (what it has in flight, less what has gone by since it began, and the new
        request's fixed cost). One not yet measured counts as the fastest measured member; with none
        measured, all alike."""
        costs = [r.state.service.cost(now) for r in members]
        fastest = min((c for c in costs if c is not None), key=lambda c: c.per_pair_s,
                      default=ServiceCost(0.0, 1.0))
        per_pair, busy = [], []
        for member, cost in zip(members, costs, strict=True):
            cost = cost or fastest
            state = member.state
            per_pair.append(max(cost.per_pair_s * state.failure_factor(), MIN_SECONDS_PER_PAIR))
            busy.append(state.busy_for(cost.fixed_s, cost.per_pair_s, now) + cost.fixed_s)
        return per_pair, busy

    def expected_wait(self, queued_pairs: int, pairs: int, now: float) -> float | None:
        """How long a recall of ``pairs`` pairs queued behind ``queued_pairs`` should take to be answered:
        the queue at the pace the ready members serve together (``ServiceRate``), then its own request
        at the member that would answer it soonest. None when nothing is queued or in flight (a lone
        recall is always sent, which is also how an old estimate is renewed) or no member answered yet."""
        members = self.ready()
        if not queued_pairs and not any(r.state.outstanding_pairs for r in members):
            return None
        latencies = [latency for r in members if (latency := r.state.expected_latency(pairs, now)) is not None]
        paces = [r.state.service.seconds_per_pair(now) for r in members]
        known = [pace for pace in paces if pace is not None]
        if not latencies or not known:
            return None
        fastest = min(known)  # a member not yet measured counts as fast as the fastest
        pairs_per_s = sum(1.0 / max(pace or fastest, MIN_SECONDS_PER_PAIR) for pace in paces)
        return queued_pairs / pairs_per_s + min(latencies)

    def pick(self, candidates: Sequence[Replica]) -> Replica:
        """Power of two choices on cost."""
        if len(candidates) == 1:
            return candidates[0]
        first, second = self._rng.sample(list(candidates), 2)
        return first if self.cost(first) <= self.cost(second) else second

    async def acquire(self, holder: object, *, exclude: Iterable[Replica] = (), priority: bool = False
                      ) -> tuple[Replica, Lease]:
        """A slot, leased to ``holder``, on the replica of lower cost among two that can take a request,
        waiting for one of its slots if it has none free (waiting for a fast replica can beat a slow one
        at once). When none is ready, any member: its attempt is then refused at once, not queued."""
        left_out = {r.url for r in exclude}
        candidates = self.ready(exclude) or [r for r in self.replicas if r.url not in left_out] or list(self.replicas)
        chosen = self.pick(candidates)
        return chosen, await chosen.state.limiter.acquire(holder, priority=priority)


def balanced_shares(pairs: int, per_pair_s: Sequence[float], busy_s: Sequence[float]) -> list[float]:
    """How many of ``pairs`` queued pairs each member should get so that all finish together: member
    ``i`` takes ``per_pair_s[i]`` a pair and is busy for ``busy_s[i]`` first (what it has in flight, and
    a new request's fixed cost), so with a common finish time ``T`` its share is
    ``(T - busy_s[i]) / per_pair_s[i]``, or nothing when it is busy past ``T`` (water-filling: members
    join from the least busy)."""
    order = sorted(range(len(per_pair_s)), key=lambda i: busy_s[i])
    joined: list[int] = []
    finish = 0.0
    for position, member in enumerate(order):
        joined.append(member)
        rate = sum(1.0 / per_pair_s[j] for j in joined)
        finish = (pairs + sum(busy_s[j] / per_pair_s[j] for j in joined)) / rate
        if position + 1 == len(order) or finish <= busy_s[order[position + 1]]:
            break
    return [max(0.0, (finish - busy_s[i]) / per_pair_s[i]) if i in joined else 0.0 for i in range(len(per_pair_s))]


BUCKET_S = 1.0


class RetryBudget:
    def __init__(self, *, ratio: float = 0.2, window_s: float = 10.0, reserve: int = 2,
                 clock: Callable[[], float] = clock.now) -> None:
        self.ratio = ratio
        self.reserve = reserve
        self._buckets = max(1, math.ceil(window_s / BUCKET_S))
        self._clock = clock
        self._window: deque[list[int]] = deque()  # [bucket number, requests, retries], oldest first

    def record_request(self) -> None:
        """A request went out for the first time."""
        self._bucket()[1] += 1

    def try_spend(self) -> bool:
        """Take one retry (or hedge) from the budget; False when it is spent."""
        bucket = self._bucket()
        requests = sum(b[1] for b in self._window)
        retries = sum(b[2] for b in self._window)
        if retries + 1 > max(self.reserve, self.ratio * requests):
            return False
        bucket[2] += 1
        return True

    def refund(self) -> None:
        """Give back the last retry taken: it turned out to cost the server nothing (a request resent
        from a stale pooled connection that the server then answered on the first try)."""
        for bucket in reversed(self._window):
            if bucket[2] > 0:
                bucket[2] -= 1
                return

    def _bucket(self) -> list[int]:
        number = int(self._clock() // BUCKET_S)
        while self._window and self._window[0][0] <= number - self._buckets:
            self._window.popleft()
        if not self._window or self._window[-1][0] != number:
            self._window.append([number, 0, 0])
        return self._window[-1]


class LatencyWindow:
    """The last ``size`` successful attempts' latencies of a replica set, in seconds."""

    def __init__(self, size: int = 256) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, seconds: float) -> None:
        self._samples.append(seconds)

    def percentile(self, fraction: float) -> float | None:
        """Nearest-rank percentile, or None while too few answers were seen."""
        if len(self._samples) < MIN_SAMPLES:
            return None
        return nearest_rank(sorted(self._samples), fraction)


async def race(first: Attempt, start_hedge: Callable[[], Attempt | None], *, delay: float, hedges: int
               ) -> list[float]:
    pending = {first}
    sent = 0
    timeout: float | None = delay
    try:
        while pending:
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is None:
                    return task.result()
            timeout = None  # from now on only an answer or a failure moves the race on
            if pending == {first} and sent < hedges and (hedge := start_hedge()) is not None:
                pending.add(hedge)
                sent += 1
        return first.result()  # every attempt failed: raise the first one's error
    finally:
        for task in pending:
            _cancel_quietly(task)


def _cancel_quietly(task: Attempt) -> None:
    """Cancel a losing attempt; its outcome is reported by the attempt itself, its error is not ours."""
    task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
