"""Infinity refuses more documents than its ``INFINITY_MAX_CLIENT_BATCH_SIZE`` with FastAPI's 422 "List should
have at most N items": too many documents, not too long an input, so no retry with tighter cuts (which keeps the
count) and no ``input_too_long`` in the counters, but requests of at most N. A query over its character limit is
too long."""

from __future__ import annotations

import json

import pytest

from usr.plugins.a0_reranker.core.dialects import catalog as cat
from usr.plugins.a0_reranker.core.dialects.wire import ScoreBatch, WireAnswer
from usr.plugins.a0_reranker.core.errors import InputTooLong, TooManyTexts

BATCH = ScoreBatch.single("q", ["a", "b"])


def _answer(problem: dict[str, object]) -> WireAnswer:
    return WireAnswer(422, json.dumps({"detail": [problem]}).encode(), "application/json")


def test_too_many_documents_is_no_input_too_long() -> None:
    problem = {"type": "too_long", "loc": ["body", "documents"],
               "msg": "List should have at most 16 items after validation, not 40"}
    with pytest.raises(TooManyTexts) as caught:
        cat.infinity_dialect().parse(_answer(problem), BATCH)
    assert not isinstance(caught.value, InputTooLong)
    assert caught.value.status == 422 and caught.value.limit == 16


def test_a_query_over_its_character_limit_is_input_too_long() -> None:
    problem = {"type": "string_too_long", "loc": ["body", "query"],
               "msg": "String should have at most 122880 characters"}
    with pytest.raises(InputTooLong):
        cat.infinity_dialect().parse(_answer(problem), BATCH)


def test_teis_batch_size_refusal_is_too_many_texts() -> None:
    body = {"error": "batch size 40 > maximum allowed batch size 32", "error_type": "Validation"}
    with pytest.raises(TooManyTexts) as caught:
        cat.tei_dialect(64).parse(WireAnswer(422, json.dumps(body).encode(), "application/json"), BATCH)
    assert not isinstance(caught.value, InputTooLong) and caught.value.reason == "http_status"
    assert caught.value.limit == 32
