"""Overload: shed at once what the servers cannot answer in time, send nothing nobody can wait for,
and hold a timeout against a server only when it had a fair chance.

A healthy server asked for more than it can serve is the normal case under multi-agent load, not a
fault. Three rules, each on the estimates of ``service_rate`` (the pairs a server is observed to
serve per second) and what is queued and in flight:

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

from typing import Final

from .verdicts import Health

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


def overload_message(expected_wait: float, remaining: float) -> str:
    return (f"the reranker is overloaded: this recall would wait about {expected_wait:.2f} s for an answer "
            f"and had {max(remaining, 0.0):.2f} s left")
