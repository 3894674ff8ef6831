"""Read the request of a hosted-style rerank API (Cohere, Jina, Voyage, Mixedbread, ...).

These APIs share one idea: a query, a list of documents (strings, and for some APIs objects), an
optional model and an optional top count. Their field names differ, so callers pass them in.
Error wording is ours (the references give few messages); each API wraps it in its own shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .wire import ParsedJson, is_int


class InputError(ValueError):
    """The request is invalid; ``str(error)`` is the message the API sends back."""


@dataclass(frozen=True)
class Fields:
    """Which JSON fields an API uses and what it allows."""

    documents: str = "documents"
    top: str = "top_n"
    objects: bool = False  # object documents ({"text": ...} or rank_fields) allowed
    rank_fields: bool = False
    model_required: bool = False
    max_documents: int | None = None


@dataclass(frozen=True)
class RerankInput:
    """A validated request: ``texts`` are what gets scored, ``originals`` what was sent."""

    query: str
    texts: list[str]
    originals: list[Any]
    top: int | None
    model: str | None
    body: dict[str, Any]

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.body.get(name, default)
        if not isinstance(value, bool):
            raise InputError(f"{name} must be a boolean")
        return value


def read_input(parsed: ParsedJson, fields: Fields) -> RerankInput:
    """Validate the body; raise InputError with a readable message when it is not acceptable."""
    if not parsed.ok:
        raise InputError(f"invalid JSON body: {parsed.error}")
    body = parsed.value
    if not isinstance(body, dict):
        raise InputError("request body must be a JSON object")
    return RerankInput(
        query=_query(body),
        texts=_texts(body, fields),
        originals=list(body[fields.documents]),
        top=_top(body, fields.top),
        model=_model(body, fields.model_required),
        body=body,
    )


def _query(body: dict[str, Any]) -> str:
    query = body.get("query")
    if not isinstance(query, str):
        raise InputError("query is required and must be a string")
    return query


def _model(body: dict[str, Any], required: bool) -> str | None:
    model = body.get("model")
    if model is None and required:
        raise InputError("model is required")
    if model is not None and not isinstance(model, str):
        raise InputError("model must be a string")
    return model


def _top(body: dict[str, Any], name: str) -> int | None:
    top = body.get(name)
    if top is None:
        return None
    if not is_int(top) or top < 1:
        raise InputError(f"{name} must be a positive integer")
    return top


def _texts(body: dict[str, Any], fields: Fields) -> list[str]:
    documents = body.get(fields.documents)
    if not isinstance(documents, list):
        raise InputError(f"{fields.documents} is required and must be a list")
    if not documents:
        raise InputError(f"list of {fields.documents} must not be empty")
    if fields.max_documents is not None and len(documents) > fields.max_documents:
        raise InputError(f"at most {fields.max_documents} {fields.documents} are allowed, got {len(documents)}")
    rank_fields = _rank_fields(body) if fields.rank_fields else None
    return [_text_of(doc, i, fields, rank_fields) for i, doc in enumerate(documents)]


def _rank_fields(body: dict[str, Any]) -> list[str] | None:
    names = body.get("rank_fields")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise InputError("rank_fields must be a list of strings")
    return names


def _text_of(doc: Any, index: int, fields: Fields, rank_fields: list[str] | None) -> str:
    """The text scored for one document; rank_fields' values are joined with newlines."""
    if isinstance(doc, str):
        return doc
    if not (fields.objects and isinstance(doc, dict)):
        raise InputError(f"document at index {index} must be a string")
    keys = rank_fields or ["text"]
    missing = [key for key in keys if key not in doc]
    if missing:
        raise InputError(f"document at index {index} is missing field {missing[0]!r}")
    return "\n".join(str(doc[key]) for key in keys)


def document_object(original: Any) -> Any:
    """What Cohere-style APIs echo back: ``{"text": s}`` for a string, else the object itself."""
    return {"text": original} if isinstance(original, str) else original
