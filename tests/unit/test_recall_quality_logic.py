"""The pure parts of issue 12: one score scale per route, the preference for the server's own /rerank,
vLLM's instruction field, the pool and floor settings, the pool counters and the recall budget."""

from __future__ import annotations

import math

import pytest

from usr.plugins.a0_reranker.core import detection as det
from usr.plugins.a0_reranker.core import recall_budget
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.dialects import ScoreBatch
from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.errors import ConfigError
from usr.plugins.a0_reranker.core.scores import LOGIT, LOWEST, PROBABILITY, RAW, normalize, settled, sigmoid
from usr.plugins.a0_reranker.core.statistics import StatsRecorder

PROBE_LOGITS = [2.4, 2.0, 0.46, -3.0]  # llama.cpp with a BERT-style GGUF
PROBE_PROBABILITIES = [0.97, 0.95, 0.02, 0.01]  # llama.cpp with a Qwen3 GGUF: P(yes)


def test_a_route_settles_a_raw_scale_from_the_probe_once() -> None:
    assert settled(RAW, PROBE_LOGITS) == LOGIT
    assert settled(RAW, PROBE_PROBABILITIES) == PROBABILITY
    assert settled(RAW, None) == RAW  # no probe answered: batch by batch
    assert settled(PROBABILITY, PROBE_LOGITS) == PROBABILITY  # a dialect that knows is believed


def test_scores_are_put_on_one_scale() -> None:
    assert normalize([0.2, 0.9], PROBABILITY) == [0.2, 0.9]
    assert normalize([0.4, 0.8], LOGIT) == pytest.approx([sigmoid(0.4), sigmoid(0.8)])  # logits inside [0, 1] too
    assert normalize([0.4, 0.8], RAW) == [0.4, 0.8]  # unknown: this batch looks like probabilities
    assert normalize([-800.0, 800.0], RAW) == [0.0, 1.0]
    assert normalize([1.0000001, -1e-9], PROBABILITY) == [1.0, 0.0]  # float noise clamped
    assert sigmoid(0.0) == 0.5 and math.isclose(sigmoid(2.1972), 0.9, abs_tol=1e-4)


def test_a_blank_documents_lowest_score_is_0_on_every_scale_and_rescales_no_other() -> None:
    assert [normalize([0.4, LOWEST], scale)[1] for scale in (PROBABILITY, LOGIT, RAW)] == [0.0, 0.0, 0.0]
    assert normalize([0.4, 0.8, LOWEST], RAW) == [0.4, 0.8, 0.0]  # still a batch of probabilities


def test_dialects_declare_what_their_servers_return() -> None:
    assert cat.LLAMACPP.score_scale == RAW and cat.SGLANG.score_scale == RAW
    assert all(d.score_scale == RAW for d in cat.GENERIC_RERANK)
    for dialect in (cat.VLLM_RERANK, cat.COHERE_V2, cat.JINA, cat.VOYAGE, cat.MIXEDBREAD, cat.tei_dialect(32),
                    cat.infinity_dialect(), *cat.qwen3_score_dialects("i")):
        assert dialect.score_scale == PROBABILITY, dialect.name


def outcome(dialect, scores):  # type: ignore[no-untyped-def]
    return det.ProbeOutcome(dialect, scores=tuple(scores))


def test_the_servers_own_rerank_wins_when_both_rank_correctly() -> None:
    qwen = cat.qwen3_score_dialects("i")[0]
    server_templated = outcome(cat.VLLM_RERANK.with_instruction("i"), [0.80, 0.78, 0.30, 0.20])
    ours_twice = outcome(qwen, [0.99, 0.98, 0.01, 0.01])  # a wider margin does not win
    assert det.judge([server_templated, ours_twice]) is server_templated
    assert det.preferred([server_templated, ours_twice]) is server_templated
    untemplated = outcome(cat.VLLM_RERANK.with_instruction("i"), [0.52, 0.49, 0.50, 0.51])
    assert det.judge([untemplated, ours_twice]) is ours_twice
    assert det.preferred([untemplated]) is None


def test_vllm_rerank_sends_the_instruction_and_the_others_do_not() -> None:
    batch = ScoreBatch.single("q", ["a", "b"])
    body = cat.VLLM_RERANK.with_instruction("Judge memories").build(batch, "m").body
    assert body == {"model": "m", "query": "q", "documents": ["a", "b"], "instruction": "Judge memories"}
    assert "instruction" not in cat.VLLM_RERANK.build(batch, "").body
    assert "instruction" not in cat.JINA.build(batch, "").body
    groups = det.candidates(det.ServerIdentity(kind="vllm"), "auto", "Judge memories")
    assert groups[0][0].instruction == "Judge memories" and groups[0][0].path == "/rerank"
    assert [d.path for d in groups[1]] == ["/score", "/v1/score"]
    assert det.candidates(det.ServerIdentity(kind="tei"), "auto", "x")[0][0].instruction == ""


def test_pool_threshold_and_floor_are_settings_on_the_0_1_scale() -> None:
    config = RerankerConfig.from_settings({"rerank_pool_threshold": "0.55", "rerank_min_score": 0})
    assert (config.pool_threshold, config.min_score) == (0.55, 0.0)
    assert (RerankerConfig().pool_threshold, RerankerConfig().min_score) == (0.5, 0.0)
    with pytest.raises(ConfigError) as caught:
        RerankerConfig.from_settings({"rerank_pool_threshold": 1.5, "rerank_min_score": -0.1})
    assert [p.split(":")[0] for p in caught.value.problems] == ["rerank_pool_threshold", "rerank_min_score"]
    with pytest.raises(ConfigError, match="rerank_min_score: expected a number"):
        RerankerConfig.from_settings({"rerank_min_score": True})


def test_pool_counters() -> None:
    recorder = StatsRecorder()
    assert recorder.snapshot().pool.as_dict() == {"recalls": 0, "mean_size": None, "starved_fraction": None,
                                                  "rescued": 0, "floor_dropped": 0}
    recorder.pool(20, 6, rescued=3, floor_dropped=1)
    recorder.pool(6, 6)  # nothing to choose
    recorder.pool(4, 5)  # fewer than returned: nothing to choose either
    pool = recorder.snapshot().pool
    assert (pool.recalls, pool.mean_size, pool.rescued, pool.floor_dropped) == (3, 10.0, 3, 1)
    assert pool.starved_fraction == pytest.approx(2 / 3)
    recorder.reset()
    assert recorder.snapshot().pool.recalls == 0


def test_the_recall_budget_warns_past_a0s_30_seconds() -> None:
    grace, store = recall_budget.BACKSTOP_GRACE_S, recall_budget.STORE_SEARCHES_S
    assert recall_budget.worst_recall_s(RerankerConfig()) == 2 * (10 + grace) + store
    assert recall_budget.warnings(RerankerConfig()) == []
    assert recall_budget.longest_safe_timeout_s() == 14
    assert recall_budget.warnings(RerankerConfig(timeout=14)) == []
    [warning] = recall_budget.warnings(RerankerConfig(timeout=20))
    assert warning.startswith("rerank_timeout 20 s:") and "41.1 s" in warning and "14 s or below" in warning


def test_a0s_llm_steps_share_the_recall_limit_and_the_warning_says_what_is_left() -> None:
    """Query preparation and the post-filter are LLM calls inside the same 30 s: what the reranker may use
    is what they leave, and the warning says how that was counted."""
    reserve = recall_budget.LLM_STEP_RESERVE_S
    both = recall_budget.RecallSteps(query_prep=True, post_filter=True)
    prep = recall_budget.RecallSteps(query_prep=True)
    assert recall_budget.RecallSteps().llm_calls == 0 and prep.llm_calls == 1 and both.llm_calls == 2
    assert recall_budget.left_for_reranking_s(both) == 30 - 2 * reserve
    assert recall_budget.longest_safe_timeout_s(both) < recall_budget.longest_safe_timeout_s(prep) < 14
    safe = recall_budget.longest_safe_timeout_s(both)
    assert recall_budget.warnings(RerankerConfig(timeout=safe), both) == []
    [warning] = recall_budget.warnings(RerankerConfig(timeout=safe + 1), both)
    worst = recall_budget.worst_recall_s(RerankerConfig(timeout=safe + 1))
    assert worst <= 30  # within the whole limit: only counting the LLM calls shows the problem
    assert warning.startswith(f"rerank_timeout {safe + 1:g} s: a recall reranks two searches")
    assert f"past the {30 - 2 * reserve:g} s that Agent Zero's 30 s recall limit leaves" in warning
    assert "query preparation and post-filter LLM calls" in warning and f"{reserve:g} s each" in warning
    assert f"Keep it at {safe:g} s or below" in warning


def test_the_budget_line_says_how_long_a_recall_may_wait_and_of_what() -> None:
    config = RerankerConfig()
    worst = recall_budget.worst_recall_s(config)
    assert recall_budget.budget_line(config) == (
        f"a recall waits for the reranker at most {worst:g} s of Agent Zero's 30 s recall limit")
    line = recall_budget.budget_line(config, recall_budget.RecallSteps(post_filter=True))
    assert line == (f"a recall waits for the reranker at most {worst:g} s of the "
                    f"{30 - recall_budget.LLM_STEP_RESERVE_S:g} s that Agent Zero's 30 s recall limit leaves after "
                    f"its post-filter LLM call (counted {recall_budget.LLM_STEP_RESERVE_S:g} s)")


def test_a_batch_window_that_is_a_large_share_of_the_timeout_is_warned() -> None:
    """Secrets and edges, round three, finding 9: a window the timeout cannot afford says so."""
    [warning] = recall_budget.warnings(RerankerConfig(batch_window_ms=1000, timeout=0.6))
    assert warning.startswith("rerank_batch_window_ms 1000 ms is 167% of rerank_timeout (0.6 s)")
    assert "at most 10% of the timeout (60 ms here)" in warning
    assert recall_budget.warnings(RerankerConfig(batch_window_ms=50, timeout=0.6)) == []


def test_a_replica_list_longer_than_recalls_keep_busy_is_warned() -> None:
    """Issue 21, finding 4: a long list costs a detection, probes and a status line per replica."""
    urls = [f"http://gpu-{n}:8000" for n in range(recall_budget.SENSIBLE_REPLICAS + 1)]
    assert recall_budget.warnings(RerankerConfig(endpoint=", ".join(urls[:-1]))) == []
    [warning] = recall_budget.warnings(RerankerConfig(endpoint=", ".join(urls)))
    assert warning.startswith("rerank_endpoint lists 17 servers: more than 16 replicas of one model")
    assert "load balancer" in warning
