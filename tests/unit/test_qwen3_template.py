"""The Qwen3-Reranker judge template, byte for byte, and its N:N /score request."""

from __future__ import annotations

import json

import pytest

from usr.plugins.a0_reranker.core.config import QWEN3_DEFAULT_INSTRUCTION
from usr.plugins.a0_reranker.core.dialects import ScoreBatch, WireAnswer
from usr.plugins.a0_reranker.core.dialects.catalog import Qwen3ScoreDialect, document_text, query_text
from usr.plugins.a0_reranker.core.errors import MalformedAnswer

# The official Transformers prompt, written out by hand from the QwenLM/Qwen3-Embedding README
# ("Transformers Usage"; not built from our constants).
OFFICIAL = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
    "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
)

TRICKY = ["{}", "{query}", "%s %d", "line one\nline two\n", "Grüße, 東京, emoji 🙂", "<Document>: fake", "\\n{0}"]


def official(query: str, doc: str, instruction: str) -> bytes:
    text = OFFICIAL.replace("{instruction}", "\x00I").replace("{query}", "\x00Q").replace("{doc}", "\x00D")
    return text.replace("\x00I", instruction).replace("\x00Q", query).replace("\x00D", doc).encode()


@pytest.mark.parametrize("query", ["What changed in the March 1 upgrade?", *TRICKY])
@pytest.mark.parametrize("doc", ["Upgrade notes: v2 shipped.", *TRICKY])
def test_split_halves_join_to_the_official_prompt(query: str, doc: str) -> None:
    expected = official(query, doc, QWEN3_DEFAULT_INSTRUCTION)
    assert (query_text(query, QWEN3_DEFAULT_INSTRUCTION) + document_text(doc)).encode() == expected


def test_the_split_point_is_vllms() -> None:
    assert query_text("q", "i").endswith("<Instruct>: i\n<Query>: q\n")
    assert document_text("d").startswith("<Document>: d<|im_end|>")


def test_custom_instruction_is_used_verbatim() -> None:
    instruction = "Given the user's request, retrieve past memories {and} facts relevant to it"
    body = Qwen3ScoreDialect(instruction).build(ScoreBatch.single("q", ["d"]), "a0-reranker").body
    assert (body["text_1"] + body["text_2"][0]).encode() == official("q", "d", instruction)


def test_one_query_is_sent_1_to_n_and_several_n_to_n() -> None:
    dialect = Qwen3ScoreDialect("i")
    one = dialect.build(ScoreBatch.single("q", ["a", "b"]), "m").body
    assert one["model"] == "m" and isinstance(one["text_1"], str) and len(one["text_2"]) == 2
    many = dialect.build(ScoreBatch(queries=("q1", "q2"), pairs=((0, "a"), (1, "b"), (0, "c"))), "").body
    assert "model" not in many
    assert many["text_1"] == [query_text("q1", "i"), query_text("q2", "i"), query_text("q1", "i")]
    assert many["text_2"] == [document_text("a"), document_text("b"), document_text("c")]


def test_score_answers_are_in_input_order_and_checked() -> None:
    dialect = Qwen3ScoreDialect("i")
    batch = ScoreBatch.single("q", ["a", "b"])
    body = {"id": "score-1", "object": "list", "data": [{"index": 0, "object": "score", "score": 0.56},
                                                        {"index": 1, "object": "score", "score": 0.90}]}
    assert dialect.parse(WireAnswer(200, json.dumps(body).encode()), batch) == [0.56, 0.90]
    with pytest.raises(MalformedAnswer):
        dialect.parse(WireAnswer(200, json.dumps({"results": []}).encode()), batch)
