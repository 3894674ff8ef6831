"""The pure parts of resilience on a fake clock: Retry-After, the retry budget, the breaker's two
triggers and its proof of life, the verdict table, and concurrency slots handed over under cancel."""

from __future__ import annotations

import asyncio

import pytest

from support.deadlines import ManualClock
from support.loop_steps import until, until_suspended
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget, health_of
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter, SlotNotHeld
from usr.plugins.a0_reranker.batching.retries import retry_kind
from usr.plugins.a0_reranker.core.dialects.server_errors import MAX_RETRY_AFTER_S, parse_retry_after
from usr.plugins.a0_reranker.core.errors import (
    ConfigError,
    DeadlineExceeded,
    DetectionFailed,
    InputTooLong,
    MalformedAnswer,
    NotHttp,
    RateLimited,
    ServerError,
    StaleConnection,
    TlsFailure,
    TransportError,
)

NOW_EPOCH = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT


@pytest.mark.parametrize(("header", "expected"), [
    ("1", 1.0), (" 120 ", 120.0), ("0", 0.0), ("2.5", 2.5),
    ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),  # IMF-fixdate
    ("Wednesday, 21-Oct-15 07:28:10 GMT", 10.0),  # obsolete RFC 850 form
    ("Wed Oct 21 07:28:05 2015", 5.0),  # asctime, no zone: GMT
    ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a date in the past: now
    ("99999999", MAX_RETRY_AFTER_S),
    ("soon", None), ("", None), ("-1", None), ("1e3", None), ("١", None), (None, None),
])
def test_retry_after_reads_seconds_and_http_dates(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, NOW_EPOCH) == expected


def test_the_budget_allows_a_share_of_the_window_or_the_reserve_and_forgets_old_requests() -> None:
    clock = ManualClock(100.0)
    budget = RetryBudget(ratio=0.2, window_s=10, reserve=2, clock=clock)
    budget.record_request()
    assert budget.try_spend() and budget.try_spend()  # the reserve: a lone request may retry twice
    assert not budget.try_spend()
    for _ in range(99):
        budget.record_request()
    spent = 2 + sum(budget.try_spend() for _ in range(100))
    assert spent == 20  # 20% of 100 requests, reserve included
    clock.now += 10.5  # the window moved on: those requests and retries are forgotten
    assert budget.try_spend() and budget.try_spend() and not budget.try_spend()


def test_a_refund_gives_one_retry_back() -> None:
    budget = RetryBudget(ratio=0.0, reserve=1, clock=ManualClock(100.0))
    assert budget.try_spend() and not budget.try_spend()
    budget.refund()
    assert budget.try_spend()


def report(breaker: CircuitBreaker, health: str) -> None:
    permit = breaker.admit()
    assert permit is not None
    permit.report(health)  # type: ignore[arg-type]


def test_the_failure_rate_opens_the_breaker_only_once_enough_was_seen() -> None:
    breaker = CircuitBreaker(BreakerPolicy(failure_rate=0.5, window=50, min_samples=20), clock=ManualClock(100.0))
    for _ in range(19):
        report(breaker, "failure")  # 503s: never "down", so never the consecutive trigger
    assert breaker.state == "closed"
    report(breaker, "failure")
    assert breaker.state == "open"


def test_fifteen_percent_failures_keep_the_breaker_closed() -> None:
    breaker = CircuitBreaker(BreakerPolicy(), clock=ManualClock(100.0))
    pattern = ["failure" if i % 20 in (3, 11) else "down" if i % 20 == 17 else "success" for i in range(2000)]
    for health in pattern:
        report(breaker, health)
    assert breaker.state == "closed"


def test_a_rate_of_one_turns_the_rate_trigger_off() -> None:
    breaker = CircuitBreaker(BreakerPolicy(failure_rate=1.0, consecutive=1000), clock=ManualClock(100.0))
    for _ in range(200):
        report(breaker, "failure")
    assert breaker.state == "closed"


def test_a_timeout_while_later_requests_came_back_is_no_sign_of_a_dead_server() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=3), clock=clock)
    held = [breaker.admit() for _ in range(3)]  # three requests the server will drop
    clock.now += 0.1
    report(breaker, "success")  # one sent later came back
    clock.now += 1
    for permit in held:
        assert permit is not None
        permit.report("down")
    assert breaker.state == "closed"
    for _ in range(3):  # but three in a row with nothing back since: a dead server
        report(breaker, "down")
    assert breaker.state == "open"


def test_half_open_admits_a_few_probes_and_needs_them_all_to_succeed() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=5, probes=2), clock=clock)
    report(breaker, "down")
    assert breaker.state == "open" and not breaker.would_admit()
    clock.now += 5
    first, second = breaker.admit(), breaker.admit()
    assert first is not None and second is not None and breaker.admit() is None
    first.report("success")
    assert breaker.state == "half_open"
    second.report("success")
    assert breaker.state == "closed"


def test_a_late_outcome_from_before_the_breaker_opened_changes_nothing() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=5, probes=1), clock=clock)
    old = breaker.admit()
    report(breaker, "down")
    assert old is not None and breaker.state == "open"
    old.report("success")  # admitted while closed, answered after the breaker opened
    assert breaker.state == "open"


def test_a_permit_reports_once_and_a_context_exit_always_reports() -> None:
    clock = ManualClock(100.0)
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1, cooldown=5, probes=1), clock=clock)
    report(breaker, "down")
    clock.now += 5
    probe = breaker.admit()
    assert probe is not None
    with pytest.raises(asyncio.CancelledError), probe:
        raise asyncio.CancelledError
    probe.report("down")  # too late: the cancellation already gave the probe back
    again = breaker.admit()
    assert again is not None and again.probe
    with again:
        pass
    assert breaker.state == "closed"


@pytest.mark.parametrize(("error", "health", "kind"), [
    (StaleConnection("x"), "neutral", "now"),  # on to another replica; the transport resent it to this one
    (TransportError("refused"), "down", "backoff"),
    (TransportError("dns", retryable=False), "down", "never"),
    (TlsFailure("cert"), "down", "never"),
    (DeadlineExceeded("slow"), "down", "never"),
    (DetectionFailed("no api"), "down", "never"),
    (ServerError(503, "busy"), "failure", "backoff"),
    (ServerError(502, "gateway"), "failure", "backoff"),
    (ServerError(504, "gateway"), "failure", "backoff"),
    (ServerError(500, "boom"), "failure", "never"),
    (ServerError(401, "key"), "down", "never"),  # a refused key: three in a row open the breaker
    (RateLimited(429, "slow down", 1.0), "neutral", "retry_after"),
    (InputTooLong(400, "too long"), "neutral", "never"),
    (MalformedAnswer("bad json"), "failure", "never"),
    (NotHttp("an SSH banner"), "failure", "never"),
    (ConfigError(["rerank_endpoint: bad"]), "neutral", "never"),
])
def test_each_error_has_a_verdict(error: Exception, health: str, kind: str) -> None:
    assert (health_of(error), retry_kind(error)) == (health, kind)


@pytest.mark.anyio
async def test_a_slot_handed_over_to_a_waiter_that_is_cancelled_comes_back() -> None:
    limiter = EndpointLimiter(1)
    first = await limiter.acquire("first")
    waiter = asyncio.create_task(limiter.acquire("waiter"))
    hedge = asyncio.create_task(limiter.acquire("hedge", priority=True))
    await until_suspended(waiter, hedge)  # both are waiting for the slot
    first.release()  # handed to the hedge (priority), in the same step
    hedge.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hedge
    lease = await waiter  # the slot the cancelled hedge was handed went on to the next waiter
    assert (limiter.in_flight, lease.holder) == (1, "waiter")
    lease.release()
    assert limiter.in_flight == 0


@pytest.mark.anyio
async def test_a_slot_given_back_twice_or_to_another_limiter_raises_and_frees_nothing() -> None:
    """Issue 22: a double release once drove ``in_flight`` negative without a word."""
    limiter, other = EndpointLimiter(2), EndpointLimiter(2)
    held, kept = limiter.take("a request"), await limiter.acquire("another request")
    held.release()
    with pytest.raises(SlotNotHeld):
        held.release()
    with pytest.raises(SlotNotHeld):
        other.release(kept)
    with pytest.raises(SlotNotHeld):
        held.hand_to("a third request")
    assert (limiter.in_flight, other.in_flight, kept.held) == (1, 0, True)
    assert kept.hand_to("a third request").holder == "a third request"
    kept.release()
    assert limiter.in_flight == 0


def balanced_state(seconds_per_pair: float, answers: int) -> EndpointState:
    state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy(), clock=ManualClock(100.0)))
    for _ in range(answers):
        state.answered(seconds_per_pair * 4, 4)
    return state


def test_the_balancer_prefers_the_faster_replica_but_never_shuts_one_out() -> None:
    fast, slow = balanced_state(0.001, 10), balanced_state(0.1, 10)
    assert fast.cost() < slow.cost()
    slow.outstanding_pairs, fast.outstanding_pairs = 0, 400  # a fast one that is far behind
    assert slow.cost() < fast.cost()
    fast.outstanding_pairs = 0
    slow.answered_at -= 60  # not asked for a minute: it is tried again
    assert slow.cost() < fast.cost()


def test_a_cold_first_answer_does_not_count_against_a_replica() -> None:
    cold = balanced_state(0.001, 0)
    cold.answered(2.0, 1)  # the first request paid for loading the model
    warm = balanced_state(0.001, 10)
    assert cold.cost() < warm.cost()  # still warming up: it gets traffic and is measured for real


def test_recent_failures_make_a_replica_look_costly_for_a_while() -> None:
    failing, healthy = balanced_state(0.001, 10), balanced_state(0.001, 10)
    failing.failed()
    failing.failed()
    assert failing.cost() > 5 * healthy.cost()
    failing.failure_at -= 60  # a minute later its failures have faded
    assert failing.cost() < 1.1 * healthy.cost()


@pytest.mark.anyio
async def test_a_free_slot_goes_to_a_hedge_then_to_the_waiter_whose_recall_is_due_soonest() -> None:
    """Agents with different timeouts wait for one server's slot: the one due sooner is served first, whatever
    came first (due is read when the slot frees); a hedge or a failover still goes ahead; on a tie, the oldest."""
    limiter = EndpointLimiter(1)
    due = {"long": 5.0, "short": 9.0, "tie": 5.0}
    held = await limiter.acquire("first")
    waiters = {name: asyncio.create_task(limiter.acquire(name, due=lambda n=name: due[n])) for name in due}
    hedge = asyncio.create_task(limiter.acquire("hedge", priority=True))
    await until_suspended(*waiters.values(), hedge)
    due["short"] = 1.0  # a recall due sooner joined that waiter's queue while it waited
    tasks, holders = [hedge, *waiters.values()], []
    for _ in tasks:
        held.release()
        await until(lambda: sum(task.done() for task in tasks) == len(holders) + 1)
        held = next(t.result() for t in tasks if t.done() and t.result().holder not in holders)
        holders.append(held.holder)
    assert holders == ["hedge", "short", "long", "tie"]
    held.release()
    assert limiter.in_flight == 0
