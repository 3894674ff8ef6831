"""What the reliability tier shares: every dialect's server settings, a recall pool of fake memories,
faults aimed at our own rerank requests only, and the acceptance checks of one fallback.

Faults are aimed with a marker word that only our test documents carry, so the detection probe (which
scores fixed documents of its own) still gets the server's real answer and the fault hits the rerank
path, also when a failure made the service forget the route and detect again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from support.servers import KINDS, Fault, FaultRule, RecordedRequest
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

MARK: Final = "zephyrquill"  # in every test document, in no probe document
TIMEOUT: Final = 0.3  # rerank_timeout of the faults that hold the answer back: each costs this once per test
DECIDING_TIMEOUT: Final = 3.0  # of the faults that fail at once: their retries, not the clock, end the call
QUERY: Final = "how do I rotate the backup encryption key"
TEXTS: Final = (
    f"{MARK} rotate the backup encryption key with the vault tool",
    f"{MARK} the cafeteria menu changes on Tuesdays",
    f"{MARK} backup jobs run nightly at two",
    f"{MARK} encryption keys live in the vault",
    f"{MARK} office plants need water twice a week",
    f"{MARK} to rotate a key create a new one and retire the old key",
    f"{MARK} the parking garage closes at nine",
    f"{MARK} key rotation needs admin rights on the backup vault",
)
LIMIT: Final = 3

# Every kind that speaks a rerank protocol (Ollama has none), with the model hosted APIs need.
DIALECT_KINDS: Final = tuple(sorted(kind for kind in KINDS if kind != "ollama"))
_MODELS: Final[Mapping[str, str]] = {
    "cohere": "rerank-v3.5",
    "jina": "jina-reranker-v2-base-multilingual",
    "voyage": "rerank-2.5",
    "mixedbread": "mixedbread-ai/mxbai-rerank-large-v1",
    "together": "Salesforce/Llama-Rank-V1",
    "xinference": "bge-reranker-v2-m3",
    "localai": "jina-reranker-v1-base-en",
    "siliconflow": "BAAI/bge-reranker-v2-m3",
    "litellm": "rerank-english-v3.0",
}
# Kinds whose rerank route checks a bearer key (vLLM only guards /v1 paths, not /rerank or /score).
KEYED_KINDS: Final = frozenset(DIALECT_KINDS) - {"vllm", "vllm_qwen3", "vllm_qwen3_templated"}


@dataclass(eq=False)
class FakeDocument:
    """A stand-in for LangChain's ``Document``: compared by identity, as the recall must preserve it."""

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)


def make_pool(texts: Sequence[str] = TEXTS) -> list[FakeDocument]:
    return [FakeDocument(text, {"id": i}) for i, text in enumerate(texts)]


def config_for(kind: str, url: str, **overrides: Any) -> RerankerConfig:
    """The settings a user would enter for ``kind`` at ``url``, with the matrix's short timeout."""
    settings: dict[str, Any] = {"endpoint": url, "timeout": TIMEOUT}
    if kind in _MODELS:
        settings["model"] = _MODELS[kind]
    settings.update(overrides)
    return RerankerConfig(**settings)


def timeout_for(reason: str) -> float:
    """The matrix's short timeout for a fault whose reason is the timeout; for any other fault, one long
    enough that its retries (backoff 50 ms, 100 ms ...) end before the deadline on a busy machine too, so
    the reason counted is the fault's and not the clock's."""
    return TIMEOUT if reason == "timeout" else DECIDING_TIMEOUT


def is_ours(request: RecordedRequest) -> bool:
    return request.method == "POST" and MARK in request.text


def on_our_requests(fault: Fault) -> FaultRule:
    """A rule that applies ``fault`` to our rerank requests only; probes and GETs pass untouched."""
    return lambda request: fault if is_ours(request) else None


def same_objects(got: Sequence[Any], expected: Sequence[Any]) -> bool:
    """The same objects in the same order (identity, not equality)."""
    return len(got) == len(expected) and all(a is b for a, b in zip(got, expected, strict=True))


def shown_text(caplog: Any, *more: Any) -> str:
    """All a user or an operator can see: log records with their exception text, counters, extras."""
    return "\n".join([*(logged_text(r) for r in caplog.records), counters_text(), *(repr(m) for m in more)])


def logged_text(record: logging.LogRecord) -> str:
    return f"{record.getMessage()} {record.exc_text or ''} {record.stack_info or ''}"


def counters_text() -> str:
    stats = runtime.statistics()
    return f"{stats!r} {json.dumps(stats.as_dict())}"


def tracebacks(records: Iterable[logging.LogRecord]) -> list[str]:
    """The records that carry a traceback (a bug, by the plugin's contract), as text."""
    return [logged_text(r) for r in records if r.exc_info or r.exc_text or r.stack_info]
