"""The real batcher, dispatch step and endpoint state of one replica around a test's ``send``: the engine that
the tests on the virtual clock (``support.virtual_time``) drive, with the server a model of their own."""

from __future__ import annotations

from usr.plugins.a0_reranker.batching.batcher import MicroBatcher
from usr.plugins.a0_reranker.batching.breaker import BreakerPolicy, CircuitBreaker, RetryBudget
from usr.plugins.a0_reranker.batching.dispatch import Dispatch, DispatchPolicy, ReplicaSet
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState, Replica, SendFn
from usr.plugins.a0_reranker.batching.queue import EndpointLimiter
from usr.plugins.a0_reranker.core.statistics import StatsRecorder


def new_state(slots: int = 8) -> EndpointState:
    return EndpointState(EndpointLimiter(slots), CircuitBreaker(BreakerPolicy()))


def one_replica_batcher(send: SendFn, *, state: EndpointState | None = None,
                        policy: DispatchPolicy | None = None) -> tuple[MicroBatcher, EndpointState]:
    """A batcher that sends each job at once (no window) to the one replica, whose state it returns too."""
    state = state or new_state()
    return replicas_batcher([Replica("only", state, send)], policy=policy), state


def replicas_batcher(replicas: list[Replica], *, policy: DispatchPolicy | None = None,
                     budget: RetryBudget | None = None) -> MicroBatcher:
    """A batcher that sends each job at once (no window) to one of ``replicas``, as the dispatcher balances them."""
    dispatch = Dispatch(ReplicaSet(replicas, budget=budget or RetryBudget()), StatsRecorder(), policy or DispatchPolicy())
    return MicroBatcher(dispatch, mixes_queries=False, max_pairs=64, window=0.0, max_queued_pairs=1000)
