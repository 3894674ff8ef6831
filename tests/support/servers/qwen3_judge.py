"""What a Qwen3-Reranker does with the text vLLM feeds it, with and without a server-side template.

Without one, vLLM joins query and document with no separator for this model. Only when that joined
text is, byte for byte, the official judge prompt (QwenLM/Qwen3-Embedding README, "Transformers Usage") does
the model reach its yes/no decision; then we score the query and document found inside the prompt.
Any other text gets a deterministic meaningless score. With ``--chat-template`` vLLM renders every
pair into that prompt itself (``TemplatedQwen3Scorer``); a pair the client had already templated is
then wrapped twice, and the judge, reading a prompt inside its prompt, still ranks but with less
confidence (0.891 instead of 0.976 on a real vLLM 0.32.0 server). This is our own reading
of the template, written independently of the client's, so it checks the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .scoring import Scorer, stable_fraction

PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the"
    ' Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
_INSTRUCT = "<Instruct>: "
_QUERY = "\n<Query>: "
_DOCUMENT = "\n<Document>: "

Untemplated = Literal["random", "inverted"]
_NOISE_CENTRE, _NOISE_WIDTH = 0.5, 0.1
_NESTED_CONFIDENCE = 0.5  # a twice-templated prompt: the score moves this far from 0.5 as it would once


@dataclass(frozen=True)
class JudgePrompt:
    """The parts of an official judge prompt."""

    instruction: str
    query: str
    document: str


def render(query: str, document: str, instruction: str = DEFAULT_INSTRUCTION) -> str:
    """The official prompt text, for tests of this module and of the server."""
    return f"{PREFIX}{_INSTRUCT}{instruction}{_QUERY}{query}{_DOCUMENT}{document}{SUFFIX}"


def parse(text: str) -> JudgePrompt | None:
    """The prompt's parts when ``text`` is exactly the official template, otherwise None.

    The instruction is any single line. The query runs to the first ``\\n<Document>: `` (queries
    come first and are short); the document is everything up to the suffix.
    """
    if not (text.startswith(PREFIX) and text.endswith(SUFFIX)):
        return None
    middle = text[len(PREFIX) : len(text) - len(SUFFIX)]
    if not middle.startswith(_INSTRUCT):
        return None
    instruction, found, rest = middle[len(_INSTRUCT) :].partition(_QUERY)
    if not found or "\n" in instruction:
        return None
    query, found, document = rest.partition(_DOCUMENT)
    return JudgePrompt(instruction, query, document) if found else None


class UntemplatedQwen3Scorer:
    """Score ``query + document`` as a Qwen3-Reranker without a template would.

    ``untemplated="random"``: near-random scores, a hash of the text mapped into 0.45..0.55, so no
    two untemplated texts separate by 0.1 or more (detection tests stay deterministic whatever the
    hash). ``"inverted"``: ``1 - scorer`` on the raw texts, a server that ranks exactly wrong.
    """

    def __init__(self, scorer: Scorer, untemplated: Untemplated = "random") -> None:
        if untemplated not in ("random", "inverted"):
            raise ValueError(f"untemplated must be 'random' or 'inverted', not {untemplated!r}")
        self.scorer = scorer
        self.untemplated = untemplated

    def __call__(self, query: str, document: str) -> float:
        prompt = parse(query + document)
        if prompt is not None:
            return self.scorer(prompt.query, prompt.document)
        if self.untemplated == "inverted":
            return 1.0 - self.scorer(query, document)
        return _noise(query + document)


def _noise(text: str) -> float:
    """A deterministic meaningless score in 0.45..0.55."""
    return _NOISE_CENTRE + (stable_fraction(text) - 0.5) * _NOISE_WIDTH


def _nested(prompt: JudgePrompt) -> JudgePrompt | None:
    """The inner query and document when the rendered query and document were themselves templated."""
    if not prompt.query.startswith(PREFIX) or not prompt.document.endswith(SUFFIX):
        return None
    return parse(prompt.query.rstrip("\n") + "\n" + prompt.document)


class TemplatedQwen3Scorer:
    """A vLLM started with the Qwen3-Reranker score template: it renders each (query, document) pair
    into the judge prompt with the request's instruction, then the model judges that prompt.

    ``score_prompt`` takes the rendered (and possibly truncated) prompt: the official prompt scores as
    the plain scorer; a prompt that wraps an already templated pair is judged with less confidence;
    anything else (a suffix lost to truncation) is meaningless.
    """

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer

    def score_prompt(self, text: str) -> float:
        prompt = parse(text)
        if prompt is None:
            return _noise(text)
        inner = _nested(prompt)
        if inner is None:
            return self.scorer(prompt.query, prompt.document)
        return _NOISE_CENTRE + (self.scorer(inner.query, inner.document) - _NOISE_CENTRE) * _NESTED_CONFIDENCE

