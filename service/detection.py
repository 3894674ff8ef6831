"""The I/O half of detection: the identifying GETs and the correctness probes. ``resolve_route`` finds what a
rerank needs; ``probe_endpoint``, the live check behind Test connection, the status tool and ``a0-reranker probe``,
reports instead of raising."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Final

from ..core import deadline as clock
from ..core import detection as det
from ..core.config import RerankerConfig
from ..core.dialects import Dialect, ScoreBatch, WireAnswer, WireRequest
from ..core.dialects import catalog as cat
from ..core.dialects.wire import read_answer
from ..core.errors import (
    KEY_REFUSAL_STATUSES,
    ConfigError,
    DeadlineExceeded,
    DetectionFailed,
    KeyRefused,
    NotHttp,
    RateLimited,
    RerankError,
    TlsFailure,
    TransportError,
)
from ..core.probe_report import ProbeReport
from ..core.scores import PROBABILITY, RAW, ScoreScale, settled
from .endpoints import HttpTransport, TlsSettings

GET_TIMEOUT_CAP: Final = 3.0  # identifying GETs are cheap; do not let a slow one eat the whole budget
Hold = Callable[[str], AbstractAsyncContextManager[None]]  # a replica's 429 hold: kept, and set by a 429


@dataclass(frozen=True, eq=False)
class Route:
    """How to talk to one endpoint. Equal only to itself: a route detected again gets a batcher of its own."""

    endpoint: str
    dialect: Dialect
    model: str
    scale: ScoreScale = PROBABILITY  # what the scores are: the dialect's word, settled by the probe
    heard: bool = True  # the server answered during detection (a hosted API known by its name is not asked)
    capped_from: int | None = None  # the texts a request detection allowed, until the server said it takes fewer

    def capped(self, limit: int) -> Route:
        dialect = dataclasses.replace(self.dialect, max_pairs=min(limit, self.dialect.max_pairs))
        return dataclasses.replace(self, dialect=dialect, capped_from=self.capped_from or self.dialect.max_pairs)

    def same_as(self, other: Route) -> bool:
        """A route detected again that says what this one says keeps this one's batcher."""
        return (self.endpoint, self.dialect, self.model, self.scale) == (other.endpoint, other.dialect, other.model,
                                                                         other.scale)


def tls_of(config: RerankerConfig) -> TlsSettings:
    return TlsSettings(verify=config.tls_verify, ca_bundle=config.ca_bundle)


@dataclass(frozen=True)
class _Probe:
    """The requests that detect one replica's API, by one deadline."""

    transport: HttpTransport
    config: RerankerConfig
    deadline: float

    async def identify(self) -> det.ServerIdentity:
        """Hosted APIs by host name, else the GETs that name a server without compute; when none got an HTTP
        answer, the port runs something else (SSH, Redis): say so, and probe nothing."""
        if hosted := det.hosted_kind(self.config.endpoint):
            return det.ServerIdentity(kind=hosted)
        get_deadline = min(self.deadline, clock.now() + GET_TIMEOUT_CAP)
        paths = det.IDENTIFYING_GETS
        bodies = await asyncio.gather(*(self._get_json(path, get_deadline) for path in paths))
        not_http = [body for body in bodies if isinstance(body, NotHttp)]
        if len(not_http) == len(bodies):
            raise not_http[0]
        readable = (None if isinstance(body, NotHttp) else body for body in bodies)
        return det.identify(dict(zip(paths, readable, strict=True)))

    async def outcomes(self, groups: list[list[Dialect]], model: str) -> list[det.ProbeOutcome]:
        """Every group at once, each trying its dialects in order until one answers."""

        async def first_answer(group: Sequence[Dialect]) -> list[det.ProbeOutcome]:
            attempts: list[det.ProbeOutcome] = []
            for dialect in group:
                outcome = await self.dialect(dialect, model)
                attempts.append(outcome)
                # a 429 asks us to wait: the server's other routes are not probed behind its back
                if outcome.answered or outcome.failure == "rate_limited" or clock.now() >= self.deadline:
                    break
            return attempts

        return [o for attempts in await asyncio.gather(*(first_answer(group) for group in groups)) for o in attempts]

    async def dialect(self, dialect: Dialect, model: str) -> det.ProbeOutcome:
        """Raises only a ``ConfigError``, the transport's for a setting every route shares (a socks proxy, a CA
        bundle that does not load): detection stops at the first route instead of naming it once per route."""
        if getattr(dialect, "requires_model", False) and not model:
            return det.ProbeOutcome(dialect, error="this API needs a model id (set rerank_model)", failure="config",
                                    sent=False)
        batch, started = ScoreBatch.single(det.PROBE_QUERY, det.PROBE_DOCUMENTS), clock.now()
        size = max(1, dialect.max_pairs)  # a TEI whose /info allows fewer texts a request than the probe's four
        scores: list[float] = []
        try:
            for first in range(0, len(batch), size):
                part = ScoreBatch(batch.queries, batch.pairs[first:first + size])
                scores += read_answer(dialect.parse, await self._send(dialect.build(part, model), self.deadline), part)
        except ConfigError:
            raise
        except RerankError as exc:
            return det.ProbeOutcome(dialect, error=str(exc), latency_s=clock.now() - started, failure=exc.reason,
                                    retry_after=getattr(exc, "retry_after", None), status=getattr(exc, "status", None),
                                    overloaded=getattr(exc, "overloaded", False))
        return det.ProbeOutcome(dialect, scores=tuple(scores), latency_s=clock.now() - started)

    async def _get_json(self, path: str, deadline: float) -> object:
        """The JSON of a 200, None for another answer or error, the error of one not in HTTP; raises as ``dialect``."""
        try:
            answer = await self._send(WireRequest("GET", path), deadline)
            return answer.json() if answer.status == 200 else None
        except NotHttp as exc:
            return exc
        except ConfigError:
            raise
        except RerankError:
            return None

    async def _send(self, request: WireRequest, deadline: float) -> WireAnswer:
        config = self.config
        return await self.transport.send(config.endpoint, request, deadline=deadline, api_key=config.api_key,
                                         tls=tls_of(config))


async def resolve_route(transport: HttpTransport, config: RerankerConfig, deadline: float) -> Route:
    """``auto`` judges the probe; a forced API only finds its path."""
    probe = _Probe(transport, config, deadline)
    identity = await probe.identify()
    model = config.model or identity.default_model
    groups = det.candidates(identity, config.api, config.instruction)
    if config.api != "auto" and det.is_known(identity):
        # a forced API on a server the GETs named: probe only to learn whether raw output (llama.cpp) is logits;
        # if that probe gets no answer the route still stands, its scores read batch by batch; a route that
        # needs a model id is passed over when none is set (Cohere's v2, where v1 works without)
        dialect = next((d for d in groups[0] if model or not getattr(d, "requires_model", False)), None)
        if dialect is None:  # every route of the API needs a model id (Voyage, Mixedbread): nothing to send
            raise ConfigError([f"rerank_model: {groups[0][0].name} needs a model id"])
        outcome = await probe.dialect(dialect, model) if dialect.score_scale == RAW else None
        if outcome is not None and (refused := _refused([outcome])) is not None:
            raise refused
        scores = outcome.scores if outcome is not None else None
        return Route(config.endpoint, cat.sized_for(dialect, model), model, settled(dialect.score_scale, scores),
                     heard=scores is not None or not det.hosted_kind(config.endpoint))
    outcomes = await probe.outcomes(groups, model)
    try:
        chosen = read_answer(det.judge, outcomes, forced=config.api != "auto")
    except DetectionFailed as exc:
        raise _unreachable(outcomes, str(exc)) or exc from None
    return Route(config.endpoint, cat.sized_for(chosen.dialect, model), model,
                 settled(chosen.dialect.score_scale, chosen.scores))


async def probe_endpoint(transport: HttpTransport, config: RerankerConfig, deadline: float, hold: Hold
                         ) -> ProbeReport:
    """Identify, probe every candidate, report in plain words; never raises. Replicas are probed at once under
    one deadline (a silent one never hides the others' rows), each under ``hold(url)``: a 429's hold is kept and
    set by them too, as by a recall."""
    urls = config.endpoints
    if len(urls) <= 1:
        return await _probe_replica(transport, config, deadline, hold)
    reports = await asyncio.gather(*(_probe_replica(transport, config.replicas[url], deadline, hold) for url in urls))
    return ProbeReport.of_replicas(config.endpoint, reports)


async def _probe_replica(transport: HttpTransport, config: RerankerConfig, deadline: float, hold: Hold
                         ) -> ProbeReport:
    """The best candidate's report (ranking wrongly too), or why none answered."""
    probe, started, forced = _Probe(transport, config, deadline), clock.now(), config.api != "auto"
    attempts: Sequence[str] = ()
    try:
        async with hold(config.endpoint):
            identity = await probe.identify()
            model = config.model or identity.default_model
            outcomes = await probe.outcomes(det.candidates(identity, config.api, config.instruction), model)
            attempts = [o.describe() for o in outcomes]
            best = _best(outcomes, forced)
    except RerankError as exc:  # ``attempts``: what each candidate did, when any was tried
        return ProbeReport.failure(config.endpoint, str(exc), attempts, clock.now() - started)
    return ProbeReport.from_outcome(config.endpoint, best, identity, model=model, attempts=attempts, forced=forced)


def _best(outcomes: Sequence[det.ProbeOutcome], forced: bool) -> det.ProbeOutcome:
    """``det.best``, or ``RateLimited`` when none answered and one got a 429, so the hold takes it."""
    try:
        return read_answer(det.best, outcomes, forced=forced)
    except DetectionFailed as exc:
        limited = _unreachable(outcomes, str(exc))
        raise limited if isinstance(limited, RateLimited) else exc from None


def _refused(attempts: Sequence[det.ProbeOutcome]) -> KeyRefused | None:
    """The refusal of the key (or of its account) by any attempt, whatever the route."""
    if (refused := next((o for o in attempts if o.status in KEY_REFUSAL_STATUSES), None)) is None:
        return None
    what = "the account behind the API key has no credit left" if refused.status == 402 else "the API key was refused"
    return KeyRefused(f"{what} ({refused.error})", tuple(o.describe() for o in attempts))


def _unreachable(attempts: Sequence[det.ProbeOutcome], message: str) -> RerankError | None:
    """The failure when it is not the API (nothing got through, the key refused, a 429), so the counters keep
    ``detection`` for a server that answered but speaks no API we know. A 429 on any candidate asks us to wait,
    whatever the other routes said: the route we look for may be the one held back."""
    sent = [o for o in attempts if o.sent]  # a route passed over for want of a model id says nothing of the server
    if attempts and not sent:
        return ConfigError([message])
    failures = {o.failure for o in sent}
    if refused := _refused(attempts):  # its list names every candidate, those passed over too
        return refused
    if "rate_limited" in failures:  # not a detection failure, and its Retry-After holds the endpoint back
        waits = [o.retry_after for o in attempts if o.retry_after is not None]
        return RateLimited(429, message, retry_after=max(waits) if waits else None,
                           overloaded=all(o.overloaded for o in sent if o.failure == "rate_limited"))
    if not sent or not failures <= {"connect", "tls", "timeout"}:  # a setting's error ended detection at once
        return None
    if failures == {"timeout"}:
        return DeadlineExceeded(message)
    return TlsFailure(message) if failures == {"tls"} else TransportError(message)
