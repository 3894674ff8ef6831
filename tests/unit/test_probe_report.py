"""The connection test's report on a replica set (issue 11): ok only when every replica ranks correctly,
the failing ones named by position and URL, each replica's report kept and redacted like the summary;
one URL's report is exactly what it was."""

from __future__ import annotations

import dataclasses

from usr.plugins.a0_reranker.core.probe_report import ProbeReport

A, B, C = "http://gpu-a:8002", "http://gpu-b:8002", "http://gpu-c:8002"
SECRET = "sk-replica-2b9f"


def ranks(url: str, margin: float, latency_ms: float) -> ProbeReport:
    return ProbeReport(ok=True, endpoint=url, message="Reranks correctly: ...", api="rerank", server="tei",
                       dialect="rerank", path="/rerank", latency_ms=latency_ms, margin=margin)


def wrong(url: str) -> ProbeReport:
    return dataclasses.replace(ranks(url, -0.2, 3.0), ok=False, message="Answers but ranks wrongly: ...")


def down(url: str) -> ProbeReport:
    return ProbeReport.failure(url, f"cannot connect (key {SECRET})", [f"rerank: refused {SECRET}"], 0.002)


def test_every_replica_ranking_correctly_is_ok_with_the_smallest_margin_and_the_slowest_latency() -> None:
    report = ProbeReport.of_replicas(f"{A}, {B}", [ranks(A, 0.9, 4.0), ranks(B, 0.6, 12.0)])
    assert report.ok and (report.margin, report.latency_ms) == (0.6, 12.0)
    assert report.message == "All 2 replicas rank correctly (smallest margin +0.60, slowest 12 ms)."
    data = report.as_dict()
    assert [r["endpoint"] for r in data["replicas"]] == [A, B] and all("note" not in r for r in data["replicas"])
    assert data["replicas"][1]["url"] == B + "/rerank" and data["url"] == f"{A}, {B}"


def test_the_failing_replicas_are_named_by_position_and_url() -> None:
    some = ProbeReport.of_replicas(f"{A}, {B}, {C}", [ranks(A, 0.9, 4.0), wrong(B), down(C)])
    assert not some.ok
    assert some.message == (f"1 of 3 replicas rank correctly; failing: replica 2 {B} (ranks wrongly), replica 3 {C} "
                            "(not working). Fix or remove the failing ones.")
    none = ProbeReport.of_replicas(f"{B}, {C}", [wrong(B), down(C)])
    assert none.message == (f"Not working: none of the 2 replicas ranks correctly: replica 1 {B} (ranks wrongly), "
                            f"replica 2 {C} (not working).")


def test_each_replicas_texts_go_through_the_one_redaction() -> None:
    report = ProbeReport.of_replicas(f"{A}, {C}", [ranks(A, 0.9, 4.0), down(C)]).redacted(SECRET)
    assert SECRET not in repr(report) and SECRET not in str(report.as_dict())
    assert report.replicas[1].message == "Not working: cannot connect (key ***)."
    assert report.replicas[1].attempts == ("rerank: refused ***",)


def test_one_urls_report_has_no_replicas() -> None:
    single = ranks(A, 0.9, 4.0)
    assert single.replicas == () and "replicas" not in single.as_dict()
    assert set(single.as_dict()) == {"ok", "endpoint", "message", "note", "api", "server", "dialect", "path", "url",
                                     "model", "latency_ms", "relevant_score", "irrelevant_score", "margin", "attempts"}
