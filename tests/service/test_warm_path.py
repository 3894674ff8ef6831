"""The warm path: a recall with the settings of the last one rebuilds and reconfigures nothing, and a
recall with changed settings gets them at once.

A group's batcher is bound to the settings and to the routes and endpoint states it was built from;
only a change of one of them rebuilds its members (a new send function per replica, a new policy).
"""

from __future__ import annotations

import pytest

from support.encoding import recall
from support.servers import RunningServer
from usr.plugins.a0_reranker.batching.breaker import CircuitBreaker
from usr.plugins.a0_reranker.batching.endpoint_state import EndpointState
from usr.plugins.a0_reranker.batching.limiter import EndpointLimiter
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.endpoints import Binding, EndpointRegistry, Members, breaker_policy

pytestmark = pytest.mark.anyio


def posts(server: RunningServer) -> int:
    return sum(r.method == "POST" for r in server.requests)


async def test_a_changed_setting_reaches_the_next_recall_and_the_old_one_comes_back(
        vllm_server: RunningServer) -> None:
    """Requests of at most 64, then 2, then 64 pairs again: 1, then 3, then 1 request for 6 memories."""
    wide = RerankerConfig(endpoint=vllm_server.url, api="rerank", timeout=30.0, max_pairs_per_request=64)
    narrow = wide.replace(max_pairs_per_request=2)
    sent = []
    for config in (wide, wide, narrow, wide):
        before = posts(vllm_server)
        assert await runtime.rerank_async(*recall(len(sent), 6), config=config) is not None
        sent.append(posts(vllm_server) - before)
    assert sent == [1, 1, 3, 1]


def state() -> EndpointState:
    config = RerankerConfig()
    return EndpointState(EndpointLimiter(2), CircuitBreaker(breaker_policy(config)))


async def test_a_group_is_built_again_only_when_what_it_is_bound_to_changes() -> None:
    registry = EndpointRegistry(StatsRecorder())
    built: list[Binding] = []
    config, route, first = RerankerConfig(endpoint="http://h:1"), object(), state()

    def group(binding: Binding) -> object:
        def members() -> Members:
            built.append(binding)
            return Members((), mixes_queries=True, max_pairs=8)
        return registry.group("key", binding.config, binding, members)

    same = Binding(config, False, (("http://h:1", route, first),))
    batcher = group(same)
    for _ in range(3):  # equal bindings, each a new object, as each recall makes its own
        assert group(Binding(config.replace(), False, (("http://h:1", route, first),))) is batcher
    assert built == [same]
    changes = [Binding(config.replace(max_retries=0), False, (("http://h:1", route, first),)),
               Binding(config.replace(max_retries=0), True, (("http://h:1", route, first),)),
               Binding(config.replace(max_retries=0), True, (("http://h:1", object(), first),)),
               Binding(config.replace(max_retries=0), True, (("http://h:1", route, state()),))]
    for changed in changes:
        assert group(changed) is batcher
    assert built == [same, *changes]
    await registry.close()
