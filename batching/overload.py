"""Overload: how fast each server gets through the pairs we send it, and the rules that shed at once
what the servers cannot answer in time, send nothing nobody can wait for, and hold a timeout against
a server only when it had a fair chance.

Each answer adds its pairs and its service interval: the time from when it was sent, or from the
previous answer if that came later, to its own answer. While our requests queue at the server (one
GPU, one pass at a time), the intervals are its passes, without the time each waited behind the one
before; while it idles between our requests, they are whole latencies, so the estimate errs on the
slow side. A server that serves requests side by side (several GPUs, a hosted API under our
concurrency cap) answers several within one interval, and their pairs count together.

Readings: seconds per pair, whatever the requests' size (what the queue ahead of a recall costs),
and a line through the answers, a fixed cost per request plus a cost per pair (what a share of a
burst costs one replica: a small request's fixed cost must not make its replica look slow per pair,
or the next burst leaves it short and the others finish last). Seconds per pair are kept over the
last few answers and over the last few dozen: a spell in which some requests hang (and hold their
slots) makes the recent figure several times slower for a second or so. Deciding whether a recall
may wait, the faster of the two counts (a recall the server turns out too slow for is still dropped
before it is sent); judging a timeout, the slower (the server gets the benefit of the doubt). Without
answers the figures fade toward fast (half as slow every ``FADE_HALF_LIFE_S``), so that one slow spell
cannot keep every recall away for ever.

A healthy server asked for more than it can serve is the normal case under multi-agent load, not a
fault. Three rules, each on these estimates and what is queued and in flight:

- **Admission.** A recall whose answer is expected later than its deadline (the work ahead of it and
  its own, at the rate the ready servers serve) gets its stock result now, as ``overload``, instead
  of at its deadline. The queue is first in, first out: an admitted recall keeps its place, so the
  estimate it was admitted on holds (measured against last in, first out in docs/overload.md).
- **Sending.** A queued recall whose deadline no longer leaves a request's expected latency (at the
  server it would go to, behind what is in flight there) is shed before it is sent: GPU time spent on
  an answer nobody reads is taken from a recall that could have used it.
- **Fair chance.** A request that timed out counts against the server (``down``, toward opening its
  breaker) only when it was sent with at least ``FAIR_CHANCE`` times its expected latency left; a
  request sent with less says more about our queue than about the server, and is ``neutral``.
  Before the first answer nothing is expected, so a server that never answers opens the breaker as
  fast as ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .breaker import Health

DECAY: Final = 0.8  # the weight an answer keeps when the next one comes: about the last five count
LONG_DECAY: Final = 0.97  # the same for the longer view: about the last thirty
FADE_HALF_LIFE_S: Final = 5.0
SPREAD: Final = 0.25  # request sizes must vary by this much (relative) before a line is drawn through them


@dataclass(frozen=True)
class ServiceCost:
    """What one request costs the server: ``fixed_s`` plus ``per_pair_s`` a pair."""

    fixed_s: float
    per_pair_s: float

    def of(self, pairs: float) -> float:
        return self.fixed_s + self.per_pair_s * pairs


class ServiceRate:
    """Owned by one ``EndpointState``; written when its requests are answered."""

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
        if variance <= (SPREAD * mean_n) ** 2:
            return ServiceCost(0.0, per_pair)
        slope = (self._nt / self._weight - mean_n * mean_t) / variance
        fixed = mean_t - slope * mean_n
        if slope <= 0 or fixed < 0:
            return ServiceCost(0.0, per_pair)
        return ServiceCost(fixed * fade, slope * fade)

    def _fade(self, now: float) -> float:
        return 0.5 ** (max(0.0, now - self._last_answer) / FADE_HALF_LIFE_S)


ADMIT_MARGIN: Final = 1.05  # the expected wait, stretched by this, must fit in the time left ...
ADMIT_SLACK_S: Final = 0.01  # ... with this to spare for the answer's way back to the caller
SEND_MARGIN: Final = 1.1  # a request is sent for a recall only with this much of its expected latency left
SEND_SLACK_S: Final = 0.005
FAIR_CHANCE: Final = 2.0


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
