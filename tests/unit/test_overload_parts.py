"""The parts overload handling is made of, on plain data and real objects: what a server is observed to
serve (``ServiceRate``), the three shedding rules, the breaker's fair-chance verdict on a timeout, a
burst shared out so that replicas finish together, and the last minute's rates."""

from __future__ import annotations

import pytest

from usr.plugins.a0_reranker.batching import endpoint_state
from usr.plugins.a0_reranker.batching.batcher import balanced_shares
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import (
    FADE_HALF_LIFE_S,
    EndpointState,
    Replica,
    ServiceRate,
)
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.errors import DeadlineExceeded
from usr.plugins.a0_reranker.core.statistics import RecentCounts, StatsRecorder


def gpu(rate: ServiceRate, passes: list[int], *, fixed: float = 0.03, per_pair: float = 0.0005,
        start: float = 100.0) -> float:
    """Requests of ``passes`` pairs, all sent at ``start`` and served one after another, as one GPU does."""
    now = start
    for pairs in passes:
        now += fixed + per_pair * pairs
        rate.answered(pairs, start, now)
    return now


def test_requests_queued_at_the_server_count_their_own_pass_not_the_wait_before_it() -> None:
    rate = ServiceRate()
    now = gpu(rate, [20] * 10)  # 40 ms a pass; the tenth waited 360 ms behind the others
    assert rate.seconds_per_pair(now) == pytest.approx(0.040 / 20)


def test_a_line_through_requests_of_different_sizes_tells_the_fixed_cost_from_the_cost_a_pair() -> None:
    rate = ServiceRate()
    now = gpu(rate, [20, 220, 40, 200, 60, 180, 20, 240])
    cost = rate.cost(now)
    assert cost is not None
    assert cost.fixed_s == pytest.approx(0.03, rel=1e-6) and cost.per_pair_s == pytest.approx(0.0005, rel=1e-6)


def test_requests_of_one_size_are_all_per_pair() -> None:
    rate = ServiceRate()
    now = gpu(rate, [20] * 6)
    cost = rate.cost(now)
    assert cost is not None and cost.fixed_s == 0.0 and cost.per_pair_s * 20 == pytest.approx(0.040)


def test_no_answer_no_estimate_and_an_old_one_fades_toward_fast() -> None:
    rate = ServiceRate()
    assert rate.seconds_per_pair(0.0) is None and rate.cost(0.0) is None
    now = gpu(rate, [20, 20])
    fresh = rate.seconds_per_pair(now)
    assert fresh is not None
    assert rate.seconds_per_pair(now + FADE_HALF_LIFE_S) == pytest.approx(fresh / 2)


def test_admission_needs_the_expected_wait_to_fit_with_room_to_spare() -> None:
    assert endpoint_state.admits(None, 0.001)  # no estimate yet, or nothing ahead: always sent
    assert endpoint_state.admits(1.0, 2.0)
    assert not endpoint_state.admits(1.0, 1.0)  # exactly the time left leaves nothing for the way back
    assert not endpoint_state.admits(3.0, 2.0)


def test_a_request_is_sent_only_with_its_expected_latency_left() -> None:
    assert endpoint_state.worth_sending(None, 0.0)
    assert endpoint_state.worth_sending(0.1, 0.2)
    assert not endpoint_state.worth_sending(0.1, 0.1)


def test_a_timeout_counts_against_the_server_only_after_a_fair_chance() -> None:
    assert endpoint_state.timeout_health(None, 0.05) == "down"  # nothing expected: a server that never answered
    assert endpoint_state.timeout_health(0.1, 0.5) == "down"
    assert endpoint_state.timeout_health(0.1, 0.15) == "neutral"  # sent with too little time: our queue's doing


def test_the_breaker_hears_a_timeout_as_the_permit_says() -> None:
    breaker = CircuitBreaker(BreakerPolicy(consecutive=1))
    for _ in range(5):
        permit = breaker.attempt()
        permit.timeout_health = "neutral"
        with pytest.raises(DeadlineExceeded), permit:
            raise DeadlineExceeded("no answer before the deadline")
    assert breaker.state == "closed"
    with pytest.raises(DeadlineExceeded), breaker.attempt():
        raise DeadlineExceeded("no answer before the deadline")
    assert breaker.state == "open"


def test_a_burst_is_shared_so_that_every_replica_finishes_together() -> None:
    assert balanced_shares(600, [0.001] * 3, [0.0] * 3) == pytest.approx([200, 200, 200])
    shares = balanced_shares(520, [0.001] * 3, [0.06, 0.04, 0.02])  # each with some in flight already
    assert sum(shares) == pytest.approx(520)
    assert [busy + 0.001 * share for busy, share in zip([0.06, 0.04, 0.02], shares, strict=True)] == pytest.approx(
        [0.640 / 3] * 3)
    assert balanced_shares(400, [0.001, 0.004], [0.0, 0.0]) == pytest.approx([320, 80])  # 4x slower: 1/5


def test_a_replica_busy_past_the_others_finish_gets_nothing() -> None:
    assert balanced_shares(100, [0.001] * 3, [0.5, 0.0, 0.0]) == pytest.approx([0, 50, 50])


ANSWERED = 100.0


def replica(name: str, passes: list[int] | None = None) -> Replica:
    """A replica whose server answered ``passes`` one after another, the last one at ``ANSWERED``."""
    state = EndpointState(EndpointLimiter(4), CircuitBreaker(BreakerPolicy()))
    if passes:
        gpu(state.service, passes, start=ANSWERED - sum(0.03 + 0.0005 * pairs for pairs in passes))

    async def send(batch: ScoreBatch, deadline: float, may_resend: object) -> list[float]:
        return [0.0] * len(batch.pairs)

    return Replica(name, state, send)


def test_a_request_is_expected_behind_what_is_in_flight_or_at_its_seen_latency_whichever_is_sooner() -> None:
    """One GPU serving a pass at a time answers a new request after what is in flight; a server that
    serves side by side (where a hung request holds nothing up) as fast as its answers came lately."""
    state = replica("a", [20] * 5).state  # 2 ms a pair of the server's time
    state.outstanding_pairs = 400
    assert state.expected_latency(20, now=ANSWERED) == pytest.approx(420 * 0.002)
    state.answered(0.005, 20, sent_at=ANSWERED - 0.005)  # answered in 5 ms: it does not serve one at a time
    assert state.expected_latency(20, now=ANSWERED) == pytest.approx(0.005)
    slower = state.service.seconds_per_pair(ANSWERED, worst=True)
    assert slower is not None  # judging a timeout: the longer reading, at the slower pace
    assert state.expected_latency(20, now=ANSWERED, worst=True) == pytest.approx(420 * slower)


def test_share_costs_count_what_is_in_flight_and_a_request_s_fixed_cost() -> None:
    measured = replica("a", [20, 220, 40, 200])
    measured.state.begin_request(100, ANSWERED - 0.01)  # one request of 100 pairs, sent 10 ms ago
    new = replica("b")
    per_pair, busy = ReplicaSet([measured, new], budget=RetryBudget()).share_costs([measured, new], now=ANSWERED)
    assert per_pair == pytest.approx([0.0005, 0.0005])  # the new one counts as fast as the fastest
    assert busy == pytest.approx([0.03 + 0.0005 * 100 - 0.01 + 0.03, 0.03])  # what is left of it, then its own


def test_the_expected_wait_is_the_queue_at_the_members_pace_then_the_soonest_answer() -> None:
    a, b = replica("a", [20] * 5), replica("b", [20] * 5)  # 40 ms a pass of 20: 2 ms a pair
    members = ReplicaSet([a, b], budget=RetryBudget())
    assert members.expected_wait(0, 20, now=ANSWERED) is None  # nothing ahead: a lone recall is always sent
    a.state.outstanding_pairs = 40
    # the queue at both members' pace, then its own request where it is answered soonest (b, idle)
    assert members.expected_wait(100, 20, now=ANSWERED) == pytest.approx(100 * 0.002 / 2 + 20 * 0.002)


def test_recent_rates_are_per_second_over_the_last_minute() -> None:
    rates = RecentCounts()
    for second in range(10):
        for _ in range(3):
            rates.add("offered", 1000.0 + second)
        rates.add("reranked", 1000.0 + second)
    assert rates.per_second(1010.0) == {"offered": 3.0, "reranked": 1.0, "shed": 0.0}
    assert rates.per_second(1200.0) == {"offered": 0.0, "reranked": 0.0, "shed": 0.0}  # a minute later: gone


def test_the_snapshot_shows_shed_recalls_goodput_and_queue_waits() -> None:
    clock = [500.0]
    stats = StatsRecorder(clock=lambda: clock[0])
    for _ in range(4):
        stats.rerank_started()
    stats.reranked(0.1, "rerank")
    stats.fell_back("overload", "the reranker is overloaded")
    stats.fell_back("queue_full")
    stats.fell_back("timeout")
    for ms in (10, 20, 30, 400):
        stats.on_queue_wait(ms / 1000)
    clock[0] += 2.0
    snapshot = stats.snapshot()
    assert snapshot.shed == 2 and snapshot.as_dict()["shed"] == 2
    assert snapshot.load.offered_per_s == 2.0 and snapshot.load.goodput_per_s == 0.5
    assert snapshot.load.shed_per_s == 1.0
    assert (snapshot.load.queue_wait_p50_ms, snapshot.load.queue_wait_p95_ms) == (20.0, 400.0)

