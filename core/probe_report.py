"""The result of a live connection test, in data and in plain words, shared by the panel, the status tool and
the CLI. With several replicas it holds one report per replica under a summary, ``ok`` only when every one
ranks correctly: one down costs capacity and detours, and one that ranks wrongly spoils what it is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .detection import ProbeOutcome, ServerIdentity, is_known
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
    replicas: tuple[ProbeReport, ...] = ()  # one per replica, in order, only when rerank_endpoint lists several

    @classmethod
    def failure(cls, endpoint: str, reason: str, attempts: Sequence[str] = (), elapsed_s: float = 0.0) -> ProbeReport:
        return cls(ok=False, endpoint=endpoint, message=f"Not working: {reason}.", attempts=tuple(attempts),
                   latency_ms=round(elapsed_s * 1000, 1))

    @classmethod
    def from_outcome(cls, endpoint: str, outcome: ProbeOutcome, identity: ServerIdentity, *, model: str,
                     attempts: Sequence[str], forced: bool) -> ProbeReport:
        """The server is what the GETs named, else the dialect that answered."""
        dialect, margin, latency_ms = outcome.dialect, outcome.margin, round(outcome.latency_s * 1000, 1)
        server = identity.kind
        if not is_known(identity):
            server = dialect.name if dialect.name != "rerank" else "rerank-compatible"
        if outcome.ranks_correctly:
            message = (f"Reranks correctly: {server} speaks {dialect.api} at {dialect.path} "
                       f"(relevant {outcome.relevant_score:.3g} vs irrelevant {outcome.irrelevant_score:.3g}, "
                       f"margin {margin:+.2f}, {latency_ms:.0f} ms).")
        else:
            hint = " Try rerank_api auto." if forced else " Check the model id and the server's model."
            message = (f"Answers but ranks wrongly: {server} at {dialect.path} scored an obviously irrelevant "
                       f"document as high as a relevant one (margin {margin:+.2f}).{hint}")
        return cls(ok=outcome.ranks_correctly, endpoint=endpoint, message=message, api=dialect.api, server=server,
                   dialect=dialect.name, path=dialect.path, model=model, latency_ms=latency_ms,
                   relevant_score=outcome.relevant_score, irrelevant_score=outcome.irrelevant_score,
                   margin=margin, attempts=tuple(attempts))

    @classmethod
    def of_replicas(cls, endpoint: str, reports: Sequence[ProbeReport]) -> ProbeReport:
        """Its latency is the slowest replica's, its margin the smallest."""
        slowest = max((r.latency_ms for r in reports if r.latency_ms is not None), default=None)
        margin = min((r.margin for r in reports if r.margin is not None), default=None)
        return cls(ok=all(r.ok for r in reports), endpoint=endpoint, message=_set_message(reports, slowest, margin),
                   latency_ms=slowest, margin=margin, replicas=tuple(reports))

    def redacted(self, *secrets: str) -> ProbeReport:
        """Every text but the endpoint (ours) masked: servers write into all of them, and may echo a secret."""
        texts: dict[str, Any] = {f.name: shown(value, *secrets) for f in dataclasses.fields(self)
                 if f.name != "endpoint" and isinstance(value := getattr(self, f.name), str)}
        return dataclasses.replace(self, **texts, attempts=tuple(shown(a, *secrets) for a in self.attempts),
                                   replicas=tuple(r.redacted(*secrets) for r in self.replicas))

    def as_dict(self, *, note: bool = True) -> dict[str, Any]:
        """JSON-ready, with the probed ``url`` and, for the panel, the not-saved ``note`` (not in the replicas')."""
        data = dataclasses.asdict(self) | {"url": self.endpoint + self.path, "attempts": list(self.attempts)}
        if self.replicas:
            data["replicas"] = [r.as_dict(note=False) for r in self.replicas]
        else:
            del data["replicas"]
        if note:
            data["note"] = NOT_SAVED
        return data


def _set_message(reports: Sequence[ProbeReport], slowest: float | None, margin: float | None) -> str:
    good = sum(r.ok for r in reports)
    if good == len(reports):
        return (f"All {len(reports)} replicas rank correctly (smallest margin {margin or 0.0:+.2f}, "
                f"slowest {slowest or 0.0:.0f} ms).")
    failing = ", ".join(f"replica {i} {r.endpoint} ({'ranks wrongly' if r.api else 'not working'})"
                        for i, r in enumerate(reports, 1) if not r.ok)
    if good == 0:
        return f"Not working: none of the {len(reports)} replicas ranks correctly: {failing}."
    return f"{good} of {len(reports)} replicas rank correctly; failing: {failing}. Fix or remove the failing ones."
