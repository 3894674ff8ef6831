"""vLLM's request models for rerank and score, with its 400 answers for invalid requests.

vLLM validates with pydantic and answers 400 (type "Bad Request") where FastAPI would say 422;
the message starts "N validation error(s):" and ``param`` is the first error's location joined
with dots (``body.9`` for a JSON syntax error at offset 9), as vLLM 0.32.0 answers on loopback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .pydantic_errors import BodyCheck, ErrorDict, body_errors
from .wire import parse_json

EMPTY_PAIRS = "At least one text_pair element must be given"
BAD_SHAPE = "Input lengths must be either 1:1, 1:N or N:N"
# /score's accepted (first, second) field pairs; builds before the 2026 refactor only know text_1/2.
SCORE_FORMS = (("text_1", "text_2"), ("data_1", "data_2"), ("queries", "documents"), ("queries", "items"))


class VllmRejected(ValueError):
    """A request vLLM refuses: status, message, error type and ``param``."""

    def __init__(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param


@dataclass(frozen=True)
class Shared:
    """Parameters common to rerank and score."""

    model: str | None
    truncate_prompt_tokens: int | None
    truncation_side: str
    use_activation: bool
    instruction: str | None = None  # newest builds hand it to a score template (PR #42412); others ignore it


def invalid(errors: list[ErrorDict]) -> VllmRejected:
    """The 400 for pydantic errors."""
    shown = "; ".join(str({**e, "loc": tuple(e["loc"])}) for e in errors)
    message = f"{len(errors)} validation error{'' if len(errors) == 1 else 's'}: {shown}"
    return VllmRejected(400, message, "Bad Request", ".".join(str(part) for part in errors[0]["loc"]))


def read_body(text: str) -> dict[str, Any]:
    parsed = parse_json(text)
    errors = body_errors(text, parsed.value, parsed.error)
    if errors:
        raise invalid(errors)
    body: dict[str, Any] = parsed.value
    return body


def read_shared(check: BodyCheck) -> Shared:
    model = check.string("model", required=False)
    truncate = check.integer("truncate_prompt_tokens", ge=-1)
    truncation = check.string("truncation_side", required=False, default="right")
    if truncation not in ("left", "right", None):
        check.errors.append({"type": "literal_error", "loc": ["body", "truncation_side"],
                             "msg": "Input should be 'left' or 'right'", "input": truncation})
    activation = _activation(check)
    instruction = check.string("instruction", required=False)
    return Shared(model, truncate, truncation or "right", activation, instruction)


def _activation(check: BodyCheck) -> bool:
    """``use_activation`` (None -> sigmoid); older builds' ``softmax``/``activation`` mean the same."""
    for name in ("use_activation", "activation", "softmax"):
        if check.body.get(name) is not None:
            return check.boolean(name, default=True)
    return True


def side(check: BodyCheck, name: str) -> list[str] | None:
    """A string or a list of strings (multimodal items are not modelled here)."""
    value = check.body.get(name)
    if isinstance(value, str):
        return [value]
    return check.string_list(name)


def read_rerank(body: dict[str, Any]) -> tuple[str, list[str], int, Shared]:
    check = BodyCheck(body)
    query = check.string("query")
    documents = side(check, "documents")
    top_n = check.integer("top_n", ge=0)
    shared = read_shared(check)
    if check.errors:
        raise invalid(check.errors)
    assert query is not None and documents is not None
    return query, documents, top_n or 0, shared


def read_score(body: dict[str, Any], newest: bool) -> tuple[list[str], list[str], Shared]:
    check = BodyCheck(body)
    forms = SCORE_FORMS if newest else SCORE_FORMS[:1]
    first, second = next(((a, b) for a, b in forms if a in body and b in body), forms[0])
    left, right = side(check, first), side(check, second)
    shared = read_shared(check)
    if check.errors:
        raise invalid(check.errors)
    assert left is not None and right is not None
    return left, right, shared


def score_pairs(left: list[str], right: list[str]) -> list[tuple[str, str]]:
    """1:1, 1:N and N:N pairings; anything else is vLLM's 400."""
    if not left or not right:
        raise VllmRejected(400, EMPTY_PAIRS, "BadRequestError")
    if len(left) == 1:
        return [(left[0], text) for text in right]
    if len(left) != len(right):
        raise VllmRejected(400, BAD_SHAPE, "BadRequestError")
    return list(zip(left, right, strict=True))
