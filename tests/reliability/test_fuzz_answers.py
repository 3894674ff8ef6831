"""Fuzz tier (marker ``fuzz``): generated server answers drive detection, the probe and rerank against
real loopback servers (``generated_answers``: any status, headers and body, valid JSON of any shape,
depth and number size, bodies cut short or not UTF-8, echoes of the key and of the memory texts).

For every answer: the result is None or a valid ranking, nothing is raised, no traceback is logged, the
reason is never ``error``, and neither the key nor any memory text (as given or as cut when sent) shows
in the logs, the counters or the report. Fixed seed (derandomized), no example database: the same
answers on every run. Each test checks that it served as many answers as it plans; together 2,000.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any, Final

import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reliability.generated_answers import GeneratedAnswer, generated_answers, targets
from reliability.kit import MARK, shown_text, tracebacks

from support.servers import RunningServer, serve_in_thread
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime
from usr.plugins.a0_reranker.service.calls import RerankResult

pytestmark = pytest.mark.fuzz

RERANK_ANSWERS: Final = 1200
DETECTION_ANSWERS: Final = 800
assert RERANK_ANSWERS + DETECTION_ANSWERS >= 2000
FUZZ: Final = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                       suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                              HealthCheck.data_too_large])

# Memories with newlines, runs of spaces and unicode, longer than the cut the configs set (64), and a
# query longer than its cut (48), as A0's queries are longer than rerank_max_query_chars.
QUERY: Final = f"{MARK} where did we put  the\nbackup keys — café ☕ 東京, and who rotates them every ninety days?"
MEMORIES: Final = (
    f"{MARK} the backup key\n  lives in the vault; rotate it   every ninety days (admin team) — naïve, 東京 ☕",
    f"{MARK}\tcafeteria menu:\n\n  soup on Tuesdays, curry on Fridays, and the parking garage closes at nine",
    f"{MARK} backup jobs   run nightly at two; their logs go to the ops bucket for thirty days ✓✓✓",
    f"{MARK} \"quoted\" and \\backslashed\\ memory text with a tab\there and a line\nbreak, kept private",
)
CUTS: Final = {"max_doc_chars": 64, "max_query_chars": 48}
# Answers here fail far more often than a real server's; the breaker would soon refuse to send anything.
OUT_OF_THE_WAY: Final = {"breaker_failures": 1000, "breaker_failure_rate": 1.0}
_KEYS = itertools.count()


def fresh_key() -> str:
    """A key no example used before: its detection, breaker and batcher start afresh."""
    return f"sk-fuzz-{next(_KEYS):06d}-7f3a9c2eb41d"


def assert_absent(shown: str, secret: str) -> None:
    """No run of 16 characters of ``secret`` (whitespace flattened) shows: not whole, cut or quoted."""
    flat, words = " ".join(shown.split()), " ".join(secret.split())
    leaked = [words[i : i + 16] for i in range(len(words) - 15) if words[i : i + 16] in flat]
    assert not leaked, (leaked, shown)


def assert_contained(result: RerankResult | None, caplog: Any, secrets: Sequence[str], *shown: Any) -> None:
    """The property of the tier, for one generated answer (``result``: of the rerank, when one ran)."""
    if result is not None and result.ranking is not None:
        assert sorted(index for index, _ in result.ranking) == list(range(len(MEMORIES)))
        scores = [score for _, score in result.ranking]
        assert all(isinstance(s, float) and math.isfinite(s) for s in scores)
        assert scores == sorted(scores, reverse=True)
    elif result is not None:
        assert result.reason and result.reason != "error", result
    assert "error" not in runtime.statistics().fallbacks
    assert tracebacks(caplog.records) == []
    text = shown_text(caplog, result, *shown)
    for secret in secrets:
        assert_absent(text, secret)
    assert MARK not in text


def rerank(portal: BlockingPortal, config: RerankerConfig) -> RerankResult:
    return portal.call(functools.partial(runtime.rerank_result_async, QUERY, list(MEMORIES), config=config))


@pytest.fixture
def examples(request: pytest.FixtureRequest) -> Iterator[list[GeneratedAnswer]]:
    """The answers a test served; after its last example, at least as many as it plans."""
    served: list[GeneratedAnswer] = []
    yield served
    planned = request.function.hypothesis.inner_test.planned
    assert len(served) >= planned, f"{len(served)} generated answers served, {planned} planned"


def planned(count: int) -> Any:
    """Mark a test function with the number of generated answers it must serve."""

    def mark(function: Any) -> Any:
        function.planned = count
        return function

    return mark


def _fresh_example(caplog: Any) -> None:
    runtime.stats_recorder().reset()
    caplog.clear()


# --- rerank on a detected route: the generated answer is what our POST gets --------------------------------


KINDS: Final = ("vllm", "tei", "vllm_qwen3")  # the rerank family, TEI's bare list, /score with the template


@pytest.fixture(scope="module")
def detected(portal: BlockingPortal) -> Iterator[dict[str, tuple[RunningServer, RerankerConfig]]]:
    """One server per kind, its route detected and cached; the breaker kept out of the way."""
    with contextlib.ExitStack() as stack:
        found = {}
        for kind in KINDS:
            server = stack.enter_context(serve_in_thread(kind))
            config = RerankerConfig(endpoint=server.url, api_key=fresh_key(), timeout=2.0, **OUT_OF_THE_WAY,
                                    **CUTS)
            assert rerank(portal, config).ranking is not None, runtime.statistics().last_error
            found[kind] = (server, config)
        yield found


@settings(FUZZ, max_examples=RERANK_ANSWERS)
@given(answer=generated_answers(), kind=st.sampled_from(KINDS), retries=st.sampled_from([0, 0, 0, 1, 2]))
@planned(RERANK_ANSWERS)
def test_any_answer_to_a_rerank_is_a_ranking_or_a_counted_fallback(
    portal: BlockingPortal, detected: dict[str, tuple[RunningServer, RerankerConfig]], everything_logged: Any,
    examples: list[GeneratedAnswer], answer: GeneratedAnswer, kind: str, retries: int,
) -> None:
    """The answer our rerank POST gets; sent again as the dispatch step decides (``retries``: most
    examples none, so that the tier's answers fit its time budget; some one or two)."""
    server, detected_config = detected[kind]
    config = detected_config.replace(max_retries=retries)  # the route and the endpoint's state stay
    _fresh_example(everything_logged)
    rule, fault = targets(answer, "ours", MARK)
    server.set_fault(rule)
    try:
        result = rerank(portal, config)
    finally:
        server.set_fault(None)
    assert fault.served, result  # the generated answer did reach the client
    examples.append(answer)
    event(f"{kind}: {'ranked' if result.ranking is not None else result.reason}")
    assert_contained(result, everything_logged, [config.api_key, QUERY, *MEMORIES])
    if answer.status == 429:  # its hold (a second or more) would keep this kind's next examples back: a new key
        fresh = detected_config.replace(api_key=fresh_key())  # is a new endpoint, its route detected at once
        assert rerank(portal, fresh).ranking is not None, runtime.statistics().last_error
        detected[kind] = (server, fresh)


# --- detection and the probe: the generated answer is what the GETs or the POSTs of detection get ----------


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, RunningServer]]:
    with serve_in_thread("vllm") as vllm, serve_in_thread("infinity") as infinity, serve_in_thread("tei") as tei:
        yield {"vllm": vllm, "infinity": infinity, "tei": tei}


@settings(FUZZ, max_examples=DETECTION_ANSWERS)
@given(answer=generated_answers(), kind=st.sampled_from(["vllm", "infinity", "tei"]),
       which=st.sampled_from(["gets", "listings", "posts", "everything"]),
       drive=st.sampled_from(["rerank", "probe", "both"]))
@planned(DETECTION_ANSWERS)
def test_any_answer_during_detection_and_the_probe_is_contained(
    portal: BlockingPortal, servers: dict[str, RunningServer], everything_logged: Any,
    examples: list[GeneratedAnswer], answer: GeneratedAnswer, kind: str, which: str, drive: str,
) -> None:
    """The answer the GETs or the POSTs of detection get, in a rerank (a fresh key: nothing cached), in
    a connection test, or in both one after the other."""
    server = servers[kind]
    _fresh_example(everything_logged)
    config = RerankerConfig(endpoint=server.url, api_key=fresh_key(), timeout=2.0, **OUT_OF_THE_WAY, **CUTS)
    rule, fault = targets(answer, which, MARK)
    server.set_fault(rule)
    try:
        result = rerank(portal, config) if drive != "probe" else None
        report = portal.call(runtime.probe_async, config) if drive != "rerank" else None
    finally:
        server.set_fault(None)
    assert fault.served, (which, result, report)
    examples.append(answer)
    event(f"{which}: {result.ranking is not None if result else '-'}, probe {report.ok if report else '-'}")
    shown = [report, json.dumps(report.as_dict())] if report else []
    assert_contained(result, everything_logged, [config.api_key, QUERY, *MEMORIES], *shown)
