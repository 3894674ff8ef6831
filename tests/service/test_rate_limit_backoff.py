"""A hosted API's 429 without Retry-After (Cohere's trial keys allow 10 rerank calls a minute; Jina and Voyage
answer 429 too, not always with a Retry-After): the endpoint is held back longer with each 429 in a row, so
recalls stop hammering a key that is over its limit, and a recall whose deadline ends inside the hold falls back
at once with nothing sent. An answer ends the streak.

Against the Cohere stand-in on the real owner loop, sequenced by the server's recorded arrivals and the counters;
the holds themselves (a second, then two ...) are the waits: the figures are checked on a virtual clock in
tests/unit/test_rate_limit_backoff.py.
"""

from __future__ import annotations

import pytest

from support.counters import accounted, stats_until
from support.deadlines import PATIENT_S, Stopwatch, assert_released_before_deadline
from support.encoding import encoding_scorer, recall
from support.servers import RecordedRequest, Respond, RunningServer, start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.detection import PROBE_QUERY
from usr.plugins.a0_reranker.service import runtime

pytestmark = pytest.mark.anyio

KEY = "trial-key"
TRIAL_LIMIT = Respond(429, {"message": "You are using a Trial key, which is limited to 10 API calls / minute."})


def posts(server: RunningServer, since: int) -> list[RecordedRequest]:
    return [r for r in server.requests[since:] if r.method == "POST"]


def detection(request: RecordedRequest) -> bool:
    return request.method == "POST" and PROBE_QUERY in request.text


def over_the_limit(server: RunningServer, limited: bool) -> None:
    server.set_fault((lambda r: TRIAL_LIMIT if r.method == "POST" else None) if limited else None)


async def test_429s_without_retry_after_in_a_row_hold_the_endpoint_longer_until_an_answer() -> None:
    server = await start_server("cohere", api_key=KEY, scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api_key=KEY, model="rerank-v3.5", timeout=5.0, max_retries=0)
        assert await runtime.rerank_async(*recall(0, 4), config=config.replace(timeout=PATIENT_S)) is not None
        before = len(server.requests)
        over_the_limit(server, True)
        assert await runtime.rerank_async(*recall(1, 4), config=config) is None  # the first 429
        assert await runtime.rerank_async(*recall(2, 4), config=config) is None  # waits out its hold: the second
        first, second = posts(server, before)
        assert second.received_at - first.received_at >= 0.5  # at least half a second, not a 50 ms backoff step

        watch, impatient = Stopwatch(), config.replace(timeout=0.5)
        assert await runtime.rerank_async(*recall(3, 4), config=impatient) is None  # inside the second's hold
        assert_released_before_deadline(watch.elapsed, impatient.timeout)
        assert len(posts(server, before)) == 2  # nothing sent: it fell back at once

        over_the_limit(server, False)  # the minute is over
        assert await runtime.rerank_async(*recall(4, 4), config=config) is not None
        answered = posts(server, before)[2]
        assert answered.received_at - second.received_at >= 1.0  # the second held at least a second

        over_the_limit(server, True)
        assert await runtime.rerank_async(*recall(5, 4), config=config) is None  # a first 429 again ...
        assert await runtime.rerank_async(*recall(6, 4), config=config.replace(timeout=1.5)) is None
        assert len(posts(server, before)) == 5  # ... its hold (at most a second) waited out: the request went out
        assert (await stats_until(accounted)).fallbacks == {"rate_limited": 5}
    finally:
        await server.close()


async def test_an_answer_to_detection_ends_the_streak_as_a_scoring_answer_does() -> None:
    """Detection answered after two 429s in a row: the key is back under its limit, so the scoring 429 that
    follows holds as the first of a streak (at most a second), not as the third (two seconds or more)."""
    server = await start_server("cohere", api_key=KEY, scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api_key=KEY, model="rerank-v3.5", timeout=5.0, max_retries=0)
        over_the_limit(server, True)
        assert await runtime.rerank_async(*recall(0, 4), config=config) is None  # detection's 429: the first
        assert await runtime.rerank_async(*recall(1, 4), config=config) is None  # waits it out: the second
        assert [r for r in posts(server, 0) if not detection(r)] == []  # nothing but detection went out yet
        server.set_fault(lambda r: TRIAL_LIMIT if r.method == "POST" and not detection(r) else None)
        assert await runtime.rerank_async(*recall(2, 4), config=config) is None  # detection answered; scoring 429
        scoring = len([r for r in posts(server, 0) if not detection(r)])
        assert scoring == 1
        assert await runtime.rerank_async(*recall(3, 4), config=config.replace(timeout=1.5)) is None
        assert len([r for r in posts(server, 0) if not detection(r)]) == 2  # its hold (a first's) waited out: sent
    finally:
        await server.close()
