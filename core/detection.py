"""Which protocol an endpoint speaks, decided from data: ``identify`` reads the JSON of a few cheap GETs,
``candidates`` turns it into dialects worth probing, ``best`` and ``judge`` pick the answer (why ``/rerank`` goes
first: docs/servers.md, "Auto-detection")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard
from urllib.parse import urlsplit

from .dialects import Dialect
from .dialects import catalog as cat
from .dialects.wire import read_answer
from .errors import DetectionFailed, MalformedAnswer
from .scores import RAW, normalize

PROBE_QUERY: Final = "What is the capital of France?"
PROBE_RELEVANT: Final = ("Paris is the capital of France.", "The capital city of France is Paris.")
PROBE_IRRELEVANT: Final = ("Bananas are rich in potassium.", "The Nile is a long river in Africa.")
PROBE_DOCUMENTS: Final = PROBE_RELEVANT + PROBE_IRRELEVANT
MIN_MARGIN: Final = 0.05  # on the probability scale; logits are passed through a sigmoid first

# Hosted APIs are known by their host name; no GET is needed to identify them.
HOSTED: Final[Mapping[str, str]] = {
    "api.cohere.com": "cohere", "api.cohere.ai": "cohere", "api.jina.ai": "jina", "api.voyageai.com": "voyage",
    "api.mixedbread.com": "mixedbread", "api.mixedbread.ai": "mixedbread", "api.together.xyz": "together",
    "api.siliconflow.cn": "siliconflow", "api.siliconflow.com": "siliconflow",
}

IDENTIFYING_GETS: Final = ("/info", "/v1/models", "/models", "/api/version")
MAX_MODEL_ID_CHARS: Final = 256  # a longer "model id" is not one: it is not sent back, nor shown


@dataclass(frozen=True)
class ServerIdentity:
    kind: str = "unknown"
    models: tuple[str, ...] = ()
    url_prefix: str = ""
    max_client_batch: int | None = None
    problem: str = ""  # set when the server is known and cannot rerank (an embedding model, Ollama ...)

    @property
    def default_model(self) -> str:
        return self.models[0] if self.models else ""


def hosted_kind(endpoint: str) -> str | None:
    return HOSTED.get((urlsplit(endpoint).hostname or "").lower())


def identify(gets: Mapping[str, Any]) -> ServerIdentity:
    """Read the identifying GETs (path -> JSON, or None). A body its server would not write counts as absent:
    the GETs are hints, the probe decides."""
    readable = {path: body for path, body in gets.items() if _reads_alone(path, body)}
    return read_answer(_identify, readable)


def _reads_alone(path: str, body: Any) -> bool:
    try:
        read_answer(_identify, {path: body})
    except MalformedAnswer:
        return False
    return True


def _identify(gets: Mapping[str, Any]) -> ServerIdentity:
    info = gets.get("/info")
    if isinstance(info, dict) and {"model_type", "max_client_batch_size", "version"} <= info.keys():
        return _identify_tei(info)
    listed: tuple[str, ...] = ()
    for path, prefix in (("/v1/models", "/v1"), ("/models", "")):
        identity = _identify_listing(gets.get(path), prefix)
        if identity.kind != "unknown":
            return identity
        listed = listed or identity.models
    version = gets.get("/api/version")
    if isinstance(version, dict) and "version" in version:
        return ServerIdentity(kind="ollama", problem="Ollama has no rerank API (ollama#3368); use another server")
    return ServerIdentity(models=listed)


def _identify_tei(info: dict[str, Any]) -> ServerIdentity:
    """Its batch limit is the smaller of its client batch size and its permits (``max_concurrent_requests``): each
    text of a request holds one, so a request with more texts than permits is refused 429 Overloaded, always."""
    model_type = info.get("model_type")
    limits = [n for n in (info.get("max_client_batch_size"), info.get("max_concurrent_requests"))
              if isinstance(n, int) and not isinstance(n, bool) and n > 0]  # JSON true is no limit of 1
    name = info.get("served_model_name") or info.get("model_id")
    served = ", ".join(model_type) if isinstance(model_type, dict) else "unknown"
    reranks = isinstance(model_type, dict) and "reranker" in model_type
    problem = "" if reranks else f"TEI is serving a {served} model, not a reranker"
    return ServerIdentity("tei", (name,) if _is_model_id(name) else (),
                          max_client_batch=min(limits, default=None), problem=problem)


def _identify_listing(listing: Any, prefix: str) -> ServerIdentity:
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    owners = {owner.lower() if isinstance(owner := m.get("owned_by"), str) else "" for m in entries}
    models = tuple(m["id"] for m in entries if _is_model_id(m.get("id")))
    rerankers = tuple(m["id"] for m in entries if _is_model_id(m.get("id")) and _may_rerank(m))
    kind = next((k for k in ("vllm", "llamacpp", "infinity", "sglang", "xinference") if k in owners), "unknown")
    if kind != "infinity":  # a server listing its LLMs beside its reranker (Xinference): the reranker is the model
        return ServerIdentity(kind, rerankers or models)
    problem = "" if rerankers else "Infinity serves no model with the rerank capability"
    return ServerIdentity("infinity", rerankers or models, url_prefix=prefix, problem=problem)


def _is_model_id(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_MODEL_ID_CHARS


def _may_rerank(model: dict[str, Any]) -> bool:
    """Infinity's ``capabilities`` or Xinference's ``model_type`` ("LLM", "embedding", "rerank"); a listing with
    neither cannot rule the model out (the probe decides)."""
    capabilities, model_type = model.get("capabilities"), model.get("model_type")
    if isinstance(capabilities, list):
        return "rerank" in capabilities
    return model_type.lower() == "rerank" if isinstance(model_type, str) else True


def candidates(identity: ServerIdentity, mode: str, instruction: str) -> list[list[Dialect]]:
    """Groups of dialects to try, in order. Within a group the first that answers wins; groups compete."""
    if identity.problem:
        raise DetectionFailed(identity.problem)
    score_group: list[Dialect] = list(cat.qwen3_score_dialects(instruction))
    if mode == "qwen3_score":
        return [score_group]
    rerank_group = _rerank_dialects(identity, instruction)
    if mode == "rerank" or (is_known(identity) and identity.kind != "vllm"):
        return [rerank_group]
    return [rerank_group, score_group]


def _rerank_dialects(identity: ServerIdentity, instruction: str) -> list[Dialect]:
    known: dict[str, list[Dialect]] = {
        "tei": [cat.tei_dialect(identity.max_client_batch)], "infinity": [cat.infinity_dialect(identity.url_prefix)],
        "vllm": [cat.VLLM_RERANK.with_instruction(instruction)], "llamacpp": [cat.LLAMACPP], "sglang": [cat.SGLANG],
        "cohere": [cat.COHERE_V2, cat.COHERE_V1], "jina": [cat.JINA], "voyage": [cat.VOYAGE],
        "mixedbread": [cat.MIXEDBREAD], "together": [cat.TOGETHER], "siliconflow": [cat.SILICONFLOW],
    }
    return known.get(identity.kind, [*cat.GENERIC_RERANK, cat.TEI, cat.MIXEDBREAD])


def is_known(identity: ServerIdentity) -> bool:
    """Whether the GETs (or the host name) pinned the route, so a forced mode needs no POST to find it."""
    return identity.kind not in ("unknown", "xinference")


@dataclass(frozen=True)
class ProbeOutcome:
    """How one dialect did on the probe: its scores for ``PROBE_DOCUMENTS``, or why it failed."""

    dialect: Dialect
    scores: tuple[float, ...] | None = None
    error: str = ""
    latency_s: float = 0.0
    failure: str = ""  # the error's reason (``connect``, ``tls``, ``http_status`` ...) when it did not answer
    retry_after: float | None = None  # a 429's Retry-After, when the failure was ``rate_limited``
    overloaded: bool = False  # a 429 for the server's own full permits (``RateLimited.overloaded``), no quota
    status: int | None = None  # the HTTP status of a failed answer
    sent: bool = True  # False: passed over without a request (a route that needs a model id, none set)

    @property
    def answered(self) -> bool:
        return self.scores is not None

    @property
    def relevant_score(self) -> float:
        return min(self.scores[: len(PROBE_RELEVANT)]) if self.scores else math.nan

    @property
    def irrelevant_score(self) -> float:
        return max(self.scores[len(PROBE_RELEVANT):]) if self.scores else math.nan

    @property
    def margin(self) -> float:
        """Worst relevant minus best irrelevant, on the probability scale (negative = ranks wrongly)."""
        if not self.scores:
            return -math.inf
        probs = normalize(self.scores, RAW)
        return min(probs[: len(PROBE_RELEVANT)]) - max(probs[len(PROBE_RELEVANT):])

    @property
    def ranks_correctly(self) -> bool:
        return self.margin >= MIN_MARGIN

    def describe(self) -> str:
        route = f"{self.dialect.name} {self.dialect.path}"
        if not self.answered:
            return f"{route}: {self.error}"
        verdict = "ranks correctly" if self.ranks_correctly else "ranks the probe wrongly"
        return f"{route}: {verdict} (margin {self.margin:+.3f})"


def preferred(outcomes: Sequence[ProbeOutcome]) -> ProbeOutcome | None:
    """The first outcome, in candidate order (not the widest margin: docs/servers.md), that ranks correctly."""
    return next((o for o in outcomes if o.answered and o.ranks_correctly), None)


def best(outcomes: Sequence[ProbeOutcome], *, forced: bool = False) -> ProbeOutcome:
    """The answer to report: a forced API's first, else the preferred one or the widest margin. DetectionFailed,
    naming the first failure of a route the server has, when none answered."""
    answered = [o for o in outcomes if o.answered]
    if not answered:  # what the server said on a route it has (a 401), not a 404 or 405 of one it lacks (which
        # says only that this candidate was not its API) nor a route passed over: the first of the most telling
        telling = min(outcomes, key=lambda o: (not o.sent, o.status in (404, 405))) if outcomes else None
        said = telling.error if telling else "no candidate API to try"
        raise DetectionFailed(f"no reranker API answered ({said})", tuple(o.describe() for o in outcomes))
    return answered[0] if forced else (preferred(answered) or max(answered, key=lambda o: o.margin))


def judge(outcomes: Sequence[ProbeOutcome], *, forced: bool = False) -> ProbeOutcome:
    """The answer a route uses: the best, refused when it ranks the probe wrongly (unless the API is forced)."""
    chosen = best(outcomes, forced=forced)
    if forced or chosen.ranks_correctly:
        return chosen
    raise DetectionFailed("the server answers but ranks an obvious relevant/irrelevant probe wrongly: check the "
                          "model (a Qwen3-Reranker needs rerank_api qwen3_score or auto on vLLM)",
                          tuple(o.describe() for o in outcomes))
