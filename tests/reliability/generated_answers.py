"""Hypothesis strategies for anything a server could answer, and the fault that answers with it.

A ``GeneratedAnswer`` is a status, a few headers and a body. The body is JSON of any shape, built
from the keys and shapes of every dialect's answers, of the identifying GETs and of the error bodies
(so the readers are driven deep, not stopped at the first key), with numbers of any size, nesting of
any depth, or bytes that are cut short or not UTF-8. Strings in it may be ``Echo`` placeholders: what
the request carried (the Authorization header, the query, a document), whole, cut to its first or last
characters, whitespace-flattened or escaped, filled in when the request arrives, as a careless server
would write them back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from hypothesis import strategies as st

# --- what the body is made of ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text inserted as it is: literals Python's encoder cannot write (5,000 digits, 1e999, depth)."""

    text: str


@dataclass(frozen=True)
class Echo:
    """A string the server copies from the request: ``source`` is ``authorization``, ``query`` or
    ``document``; ``shape`` how it is written back; ``size`` how many characters a cut keeps."""

    source: str
    shape: str
    index: int = 0
    size: int = 16


@dataclass(frozen=True)
class Scored:
    """A well-formed answer with one result per document the request carries (so some answers rank):
    in ``container`` (``results``, ``data`` or a bare list), scores under ``score_key``, results in
    ``order`` (rotated), with ``extra`` fields in each."""

    container: str
    score_key: str
    scores: tuple[float, ...]
    order: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def value(self, documents: int) -> Any:
        items = [{"index": i, self.score_key: self.scores[i % len(self.scores)], **self.extra} for i in range(documents)]
        items = items[self.order % max(documents, 1):] + items[: self.order % max(documents, 1)]
        return items if self.container == "bare" else {self.container: items, "object": "list"}


ECHO_SHAPES: Final = ("whole", "head", "tail", "head_then_ellipsis", "flattened", "json_escaped", "repr")
KEYS: Final = ("results", "data", "index", "relevance_score", "score", "document", "object", "id", "owned_by",
               "capabilities", "model_type", "max_client_batch_size", "version", "served_model_name", "model_id",
               "error", "error_type", "message", "detail", "loc", "msg", "type", "text", "meta", "usage", "model")
OWNERS: Final = ("vllm", "llamacpp", "infinity", "sglang", "xinference", "openai", "")

echoes = st.builds(Echo, st.sampled_from(("authorization", "query", "document")), st.sampled_from(ECHO_SHAPES),
                   st.integers(0, 12), st.integers(4, 80))
huge_integers = st.integers(15, 5000).map(lambda digits: Raw("9" * digits))
odd_literals = st.sampled_from([Raw("1e999"), Raw("-1e999"), Raw("NaN"), Raw("Infinity"), Raw("-0"), Raw("1E400")])
numbers = st.integers(-3, 12) | st.integers() | st.floats() | huge_integers | odd_literals
texts = st.text(max_size=24) | st.sampled_from(["rerank", "reranker", "vllm", "infinity", "Not Found", "…", "..."])
leaves = st.none() | st.booleans() | numbers | texts | echoes
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner,
                                                                max_size=5),
    max_leaves=16,
)
small_values = leaves | st.lists(leaves, max_size=3)  # inside the shapes: cheap to draw, still any type


def _items(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Results as the rerank family writes them, with any index, score and extra fields."""
    item = st.fixed_dictionaries(
        {"index": st.integers(-1, 12) | values},
        optional={"relevance_score": st.floats(-60, 60) | values, "score": st.floats(-60, 60) | values,
                  "document": values, "object": st.just("score")},
    )
    return st.lists(item | values, max_size=14)


def _shaped(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Every shape a reader looks into, filled with anything."""
    listing_entry = st.fixed_dictionaries(
        {"id": texts | echoes | values, "owned_by": st.sampled_from(OWNERS) | values},
        optional={"capabilities": st.lists(st.sampled_from(["rerank", "embed"])) | values, "object": values},
    )
    return st.one_of(
        _items(values).map(lambda items: {"results": items}),
        _items(values).map(lambda items: {"data": items, "object": "list"}),
        _items(values),
        st.lists(listing_entry | values, max_size=4).map(lambda data: {"object": "list", "data": data}),
        st.fixed_dictionaries({"model_type": st.just({"reranker": {}}) | values, "max_client_batch_size": values,
                               "version": values}, optional={"model_id": texts | echoes | values}),
        st.fixed_dictionaries({"version": values}),
        st.fixed_dictionaries({"error": st.fixed_dictionaries({"message": texts | echoes | values,
                                                               "type": values}) | values},
                              optional={"error_type": values}),
        st.fixed_dictionaries({"detail": st.lists(st.fixed_dictionaries(
            {"loc": st.lists(texts | numbers) | values, "msg": texts | echoes | values}) | values, max_size=4)
            | texts | echoes | values}),
        st.fixed_dictionaries({"message": texts | echoes | values}, optional={"object": st.just("error")}),
    )


scored = st.builds(Scored, st.sampled_from(["results", "data", "bare"]), st.sampled_from(["relevance_score", "score"]),
                   st.lists(st.floats(-60, 60), min_size=1, max_size=6).map(tuple), st.integers(0, 20),
                   st.dictionaries(st.sampled_from(["document", "meta", "text", "id"]), small_values, max_size=2))


def _deep(depth: int, opener: str) -> Raw:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return Raw(opener * depth + "0" + closer * depth)


deep_values = st.builds(_deep, st.integers(100, 200_000), st.sampled_from(["[", '{"a":']))


# --- the answer ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratedAnswer:
    status: int
    headers: Mapping[str, str]
    value: Any = None  # JSON value with Raw and Echo parts; None with ``raw`` set
    raw: bytes | None = None  # a body given as bytes (not UTF-8, empty, any binary)
    cut_at: float | None = None  # keep this fraction of the encoded body (a body broken off)

    def body(self, material: Mapping[str, str | list[str]]) -> bytes:
        data = self.raw if self.raw is not None else to_json(self.value, material).encode("utf-8")
        return data if self.cut_at is None else data[: int(len(data) * self.cut_at)]


STATUSES: Final = [200] * 12 + [400, 401, 403, 404, 405, 413, 422, 424, 429, 498, 500, 501, 502, 503, 504, 204, 302]
HEADER_VALUES: Final = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
headers = st.dictionaries(
    st.sampled_from(["Content-Type", "Retry-After", "Content-Encoding", "X-Request-Id", "WWW-Authenticate",
                     "Location", "Cache-Control"]),
    st.sampled_from(["application/json", "application/json; charset=utf-8", "text/html", "text/plain", "",
                     "gzip", "deflate", "identity", "0", "-1", "1e999", "5", "Wed, 21 Oct 2015 07:28:00 GMT"])
    | HEADER_VALUES,
    max_size=3,
)
bodies = st.one_of(
    scored.map(lambda v: {"value": v}),
    _shaped(small_values).map(lambda v: {"value": v}),
    json_values.map(lambda v: {"value": v}),
    deep_values.map(lambda v: {"value": v}),
    st.binary(max_size=64).map(lambda b: {"raw": b}),
    st.sampled_from([b"", b"\xff\xfe\xfd", b'{"results": [\xc3\x28]}', b"<html>502</html>", b"null"])
    .map(lambda b: {"raw": b}),
)


@st.composite
def generated_answers(draw: st.DrawFn) -> GeneratedAnswer:
    status = draw(st.sampled_from(STATUSES) | st.integers(200, 599))
    body = draw(bodies)
    cut_at = draw(st.none() | st.none() | st.floats(0, 1))
    return GeneratedAnswer(status=status, headers=draw(headers), cut_at=cut_at, **body)


# --- encoding, with the request's material filled in -------------------------------------------------------


def to_json(value: Any, material: Mapping[str, str | list[str]]) -> str:
    """JSON text of ``value``, with Raw parts inserted and Echo parts filled from ``material``."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Echo):
        return json.dumps(echoed(value, material), allow_nan=True)
    if isinstance(value, Scored):
        return to_json(value.value(len(material.get("document") or ())), material)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {to_json(v, material)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(to_json(v, material) for v in value) + "]"
    return json.dumps(value, allow_nan=True)


_SHAPES: Final[Mapping[str, Callable[[str, int], str]]] = {
    "whole": lambda text, _n: text,
    "head": lambda text, n: text[: max(n, 16)],
    "tail": lambda text, n: text[-max(n, 16):],
    "head_then_ellipsis": lambda text, n: text[:n] + "...",
    "flattened": lambda text, _n: " ".join(text.split()),
    "json_escaped": lambda text, _n: json.dumps(text)[1:-1],
    "repr": lambda text, _n: repr(text),
}


def echoed(echo: Echo, material: Mapping[str, str | list[str]]) -> str:
    source = material.get(echo.source) or ""
    if isinstance(source, list):
        source = source[echo.index % len(source)] if source else ""
    return f"got {_SHAPES[echo.shape](source, echo.size)} here"


def request_material(headers: Mapping[str, str], body: Any) -> dict[str, str | list[str]]:
    """What an echo may copy: the Authorization header, the query and the documents as they arrived."""
    material: dict[str, str | list[str]] = {"authorization": headers.get("Authorization", "")}
    if isinstance(body, dict):
        query = body.get("query") or body.get("text_1") or ""
        material["query"] = query if isinstance(query, str) else " ".join(map(str, query))
        documents = body.get("documents") or body.get("texts") or body.get("input") or body.get("text_2") or []
        material["document"] = [str(d) for d in documents] if isinstance(documents, list) else []
    return material


@dataclass(frozen=True)
class Answering:
    """A fault that answers with ``answer`` (what the request carried filled into its echoes)."""

    answer: GeneratedAnswer
    served: list[GeneratedAnswer] = field(default_factory=list, compare=False)

    async def apply(self, request: web.Request, proceed: Callable[[], Any]) -> web.StreamResponse:
        try:
            body = await request.json() if request.body_exists else None
        except ValueError:
            body = None
        self.served.append(self.answer)
        data = self.answer.body(request_material(request.headers, body))
        return web.Response(status=self.answer.status, body=data, headers=dict(self.answer.headers))


def targets(answer: GeneratedAnswer, which: str, marker: str) -> tuple[Callable[[Any], Answering | None], Answering]:
    """A fault rule that gives ``answer`` to ``which`` requests (``ours``: the rerank POSTs carrying
    ``marker``), and the fault, which records each time it answered."""
    fault = Answering(answer)
    chosen: dict[str, Callable[[Any], bool]] = {
        "ours": lambda r: r.method == "POST" and marker in r.text,
        "posts": lambda r: r.method == "POST",
        "gets": lambda r: r.method == "GET",
        "listings": lambda r: r.method == "GET" and r.path in ("/models", "/v1/models"),
        "everything": lambda _r: True,
    }
    return (lambda request: fault if chosen[which](request) else None), fault
