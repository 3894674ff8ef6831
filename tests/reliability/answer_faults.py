"""Faults built from each server's own answers: its real success body, damaged in one precise way, and
its real error bodies replayed on the rerank route.

Damaging the server's real answer (rather than writing one per dialect by hand) keeps every shape
exact: Cohere's ``meta``, vLLM's ``document`` objects, SGLang's ``meta_info``, TEI's bare list and
the ``/score`` answer all stay as the server wrote them, except for the one thing under test.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from support.servers import Respond

Mutation = Callable[[Any], Any]
_RAW: Final = "__raw_json_token__"  # a placeholder for JSON text Python cannot produce (1e999)


def result_items(answer: Any) -> list[Any]:
    """The list of scored results in any dialect's answer: ``results``, ``data`` or a bare list."""
    if isinstance(answer, list):
        return answer
    for key in ("results", "data"):
        if isinstance(answer, dict) and isinstance(answer.get(key), list):
            return answer[key]  # type: ignore[no-any-return]
    raise AssertionError(f"no result list in {answer!r}")


def score_key(item: dict[str, Any]) -> str:
    return "relevance_score" if "relevance_score" in item else "score"


def _on_items(change: Callable[[list[Any]], None]) -> Mutation:
    def mutate(answer: Any) -> Any:
        damaged = copy.deepcopy(answer)
        change(result_items(damaged))
        return damaged

    return mutate


def _on_first(change: Callable[[dict[str, Any], int], None]) -> Mutation:
    """Damage the first result; ``change`` gets it and the number of results."""
    return _on_items(lambda items: change(items[0], len(items)))


def _set_score(value: Any) -> Mutation:
    return _on_first(lambda item, _n: item.__setitem__(score_key(item), value))


def _replace_items(value: Any) -> Mutation:
    def mutate(answer: Any) -> Any:
        if isinstance(answer, list):
            return value
        damaged = copy.deepcopy(answer)
        key = "results" if "results" in damaged else "data"
        damaged[key] = value
        return damaged

    return mutate


# name -> how the real answer is damaged. Every one must make the client fall back ("malformed").
MUTATIONS: Final[Mapping[str, Mutation]] = {
    "one_result_missing": _on_items(lambda items: items.pop()),
    "one_result_too_many": _on_items(lambda items: items.append({**items[0], "index": len(items)})),
    "empty_results": _on_items(lambda items: items.clear()),
    "index_out_of_range": _on_first(lambda item, n: item.__setitem__("index", n)),
    "index_negative": _on_first(lambda item, _n: item.__setitem__("index", -1)),
    "index_duplicated": _on_items(lambda items: items[1].__setitem__("index", items[0]["index"])),
    "index_field_missing": _on_first(lambda item, _n: item.pop("index")),
    "index_as_text": _on_first(lambda item, _n: item.__setitem__("index", str(item["index"]))),
    "index_as_fraction": _on_first(lambda item, _n: item.__setitem__("index", item["index"] + 0.5)),
    "score_nan": _set_score(float("nan")),
    "score_infinite": _set_score(float("inf")),
    "score_negative_infinite": _set_score(float("-inf")),
    "score_overflowing_literal": _set_score(_RAW),
    "score_integer_too_large_for_a_float": _set_score(10**400),
    "score_as_text": _set_score("0.9"),
    "score_null": _set_score(None),
    "score_boolean": _set_score(True),
    "score_field_missing": _on_first(lambda item, _n: item.pop(score_key(item))),
    "result_not_an_object": _on_items(lambda items: items.__setitem__(0, 0.5)),
    "results_not_a_list": _replace_items({"0": 0.5}),
    "answer_is_a_string": lambda _answer: "ok",
}


def encode(answer: Any) -> bytes:
    """JSON as a sloppy server might write it: NaN and Infinity literals allowed, 1e999 possible."""
    text = json.dumps(answer, allow_nan=True)
    return text.replace(json.dumps(_RAW), "1e999").encode("utf-8")


@dataclass(frozen=True)
class DamagedAnswer:
    """Let the server answer, then damage its JSON with ``mutate`` (or cut it short)."""

    mutate: Mutation | None = None
    cut_in_half: bool = False

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        real = await proceed()
        body = real.body if isinstance(real, web.Response) else None
        assert isinstance(body, bytes) and real.status == 200, "damage needs the server's real 200 answer"
        if self.cut_in_half:
            damaged = body[: len(body) // 2]
        else:
            assert self.mutate is not None
            damaged = encode(self.mutate(json.loads(body)))
        return web.Response(status=200, body=damaged, content_type="application/json")


HTML_PAGE: Final = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


# Overload and internal-error answers in each server's own error shape (as each server's source gives it; the same shapes
# the loopback servers use for their other errors).
def _openai(status: int, message: str, kind: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _litellm(status: int, message: str, kind: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def _flat(status: int, message: str, kind: str | None) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}


def _llamacpp(status: int, message: str, kind: str | None) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "type": kind}}


def _tei(_status: int, message: str, kind: str | None) -> dict[str, Any]:
    return {"error": message, "error_type": kind}


def _message(_status: int, message: str, _kind: str | None) -> dict[str, Any]:
    return {"message": message}


def _detail(_status: int, message: str, _kind: str | None) -> dict[str, Any]:
    return {"detail": message}


_ERROR_SHAPES: Final[Mapping[str, Callable[[int, str, str | None], dict[str, Any]]]] = {
    "cohere": _message, "together": _message, "siliconflow": _message,
    "jina": _detail, "localai": _detail, "voyage": _detail, "mixedbread": _detail, "xinference": _detail,
    "infinity": lambda s, m, _k: _openai(s, m, None),
    "vllm": _openai, "vllm_qwen3": _openai, "vllm_qwen3_templated": _openai, "sglang": _flat, "llamacpp": _llamacpp,
    "tei": _tei, "litellm": _litellm,
}

# (status, message, error type): what an overloaded or broken server says.
SERVER_TROUBLE: Final[Mapping[str, tuple[int, str, str]]] = {
    "overloaded_503": (503, "Model is overloaded", "Unhealthy"),
    "rate_limited_429": (429, "rate limit reached, retry later", "rate_limit_error"),
    "internal_500": (500, "internal server error", "InternalServerError"),
}


def trouble_answer(kind: str, case: str) -> Respond:
    status, message, error_type = SERVER_TROUBLE[case]
    return Respond(status, _ERROR_SHAPES[kind](status, message, error_type))
