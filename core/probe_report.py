"""The result of a live connection test, in data and in plain words; shared by the panel, the status
tool and the CLI so they all say the same thing."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .detection import ProbeOutcome
from .redaction import shown

NOT_SAVED = "Test does not save: click Save to use these settings."


@dataclass(frozen=True)
class ProbeReport:
    ok: bool
    endpoint: str
    message: str
    api: str = ""
    server: str = ""
    dialect: str = ""
    path: str = ""
    model: str = ""
    latency_ms: float | None = None
    relevant_score: float | None = None
    irrelevant_score: float | None = None
    margin: float | None = None
    attempts: tuple[str, ...] = ()

    @classmethod
    def failure(cls, endpoint: str, reason: str, attempts: Sequence[str], elapsed_s: float) -> ProbeReport:
        message = f"Not working: {reason}."
        return cls(ok=False, endpoint=endpoint, message=message, attempts=tuple(attempts),
                   latency_ms=round(elapsed_s * 1000, 1))

    @classmethod
    def from_outcome(
        cls, endpoint: str, outcome: ProbeOutcome, *, server: str, model: str, attempts: Sequence[str], forced: bool
    ) -> ProbeReport:
        dialect = outcome.dialect
        latency_ms = round(outcome.latency_s * 1000, 1)
        margin = outcome.margin
        if outcome.ranks_correctly:
            message = (
                f"Reranks correctly: {server} speaks {dialect.api} at {dialect.path} "
                f"(relevant {outcome.relevant_score:.3g} vs irrelevant {outcome.irrelevant_score:.3g}, "
                f"margin {margin:+.2f}, {latency_ms:.0f} ms)."
            )
        else:
            hint = " Try rerank_api auto." if forced else " Check the model id and the server's model."
            message = (
                f"Answers but ranks wrongly: {server} at {dialect.path} scored an obviously irrelevant document "
                f"as high as a relevant one (margin {margin:+.2f}).{hint}"
            )
        return cls(
            ok=outcome.ranks_correctly, endpoint=endpoint, message=message, api=dialect.api, server=server,
            dialect=dialect.name, path=dialect.path, model=model, latency_ms=latency_ms,
            relevant_score=outcome.relevant_score, irrelevant_score=outcome.irrelevant_score,
            margin=margin, attempts=tuple(attempts),
        )

    def redacted(self, *secrets: str) -> ProbeReport:
        """The same report with every text but the endpoint (ours) through the one masking: servers write
        into all of them (error bodies, model ids, names), and may echo a secret into any."""
        texts: dict[str, Any] = {f.name: shown(value, *secrets) for f in dataclasses.fields(self)
                 if f.name != "endpoint" and isinstance(value := getattr(self, f.name), str)}
        return dataclasses.replace(self, **texts, attempts=tuple(shown(a, *secrets) for a in self.attempts))

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "endpoint": self.endpoint,
            "message": self.message,
            "note": NOT_SAVED,
            "api": self.api,
            "server": self.server,
            "dialect": self.dialect,
            "path": self.path,
            "url": self.endpoint + self.path if self.path else self.endpoint,
            "model": self.model,
            "latency_ms": self.latency_ms,
            "relevant_score": self.relevant_score,
            "irrelevant_score": self.irrelevant_score,
            "margin": self.margin,
            "attempts": list(self.attempts),
        }
