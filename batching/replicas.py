"""The replicas one batcher's requests can go to, and how one is chosen for each attempt.

Power of two choices (as Finagle's and Envoy's least-request balancers do): of the replicas that can
take a request now (breaker admitting, no Retry-After pending), pick two at random and take the one
that costs less: its observed seconds per pair times its pairs in flight plus one, raised by its
recent failures. The request then waits for a slot of that replica if all are taken: the expected
wait behind a fast replica's few pairs can be shorter than a slow replica's own time. A replica not
yet measured counts as fast as the fastest one, so a new one gets traffic as soon as it is the least
loaded, and a slow or failing one gets a smaller share by itself. Each replica keeps its own
concurrency cap and breaker (its ``EndpointState``); the retry budget and the latency window that
sets the hedging delay belong to the set. With one replica all of this is that replica's slots.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from ..core.dialects import ScoreBatch
from .endpoint_state import EndpointState
from .latency import LatencyWindow
from .retry_budget import RetryBudget

# send(batch, deadline, may_resend): one HTTP exchange; ``may_resend()`` says whether it may be sent once
# more, at once on a fresh connection, when the pooled one it went out on turns out stale
SendFn = Callable[[ScoreBatch, float, Callable[[], bool]], Awaitable[list[float]]]


@dataclass(eq=False)
class Replica:
    """One server of the set: where it is, its dispatch state, and how to send it a batch."""

    url: str
    state: EndpointState
    send: SendFn


class ReplicaSet:
    """Use on the owner loop only. ``update`` replaces the members as routes are found or lost."""

    def __init__(self, replicas: Sequence[Replica], *, budget: RetryBudget, rng: random.Random | None = None
                 ) -> None:
        self.replicas: tuple[Replica, ...] = tuple(replicas)
        self.budget = budget
        self.latency = LatencyWindow()
        self._rng = rng or random.Random()

    def update(self, replicas: Sequence[Replica]) -> None:
        """New members (routes found or lost); a member keeps its object, so requests holding it still
        name it, and takes the new sender."""
        known = {r.url: r for r in self.replicas}
        for replica in replicas:
            kept = known.get(replica.url)
            if kept is not None and kept.state is replica.state:
                kept.send = replica.send
        self.replicas = tuple(known[r.url] if r.url in known and known[r.url].state is r.state else r
                              for r in replicas)

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
        return member.state.cost(self._fastest_seconds_per_pair() or 0.0)

    def speeds(self, members: Sequence[Replica]) -> list[float]:
        """Each member's pairs per second, from its seconds per pair, lowered by its recent failures as
        its cost is raised; one not yet measured counts as the fastest of the set."""
        fastest = self._fastest_seconds_per_pair() or 1.0
        return [1.0 / ((r.state.seconds_per_pair_now() or fastest) * r.state.failure_factor()) for r in members]

    def _fastest_seconds_per_pair(self) -> float | None:
        return min((s for r in self.replicas if (s := r.state.seconds_per_pair_now()) is not None), default=None)

    def pick(self, candidates: Sequence[Replica]) -> Replica:
        """Power of two choices on cost."""
        if len(candidates) == 1:
            return candidates[0]
        first, second = self._rng.sample(list(candidates), 2)
        return first if self.cost(first) <= self.cost(second) else second

    async def acquire(self, *, exclude: Iterable[Replica] = (), priority: bool = False) -> Replica:
        """A slot on the replica of lower cost among two that can take a request, waiting for one of
        its slots if it has none free (waiting for a fast replica can beat a slow one at once). When
        none is ready, any member: its attempt is then refused at once, not queued."""
        left_out = {r.url for r in exclude}
        candidates = self.ready(exclude) or [r for r in self.replicas if r.url not in left_out] or list(self.replicas)
        chosen = self.pick(candidates)
        await chosen.state.limiter.acquire(priority=priority)
        return chosen
