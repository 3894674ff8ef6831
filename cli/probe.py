"""``probe ENDPOINT...``: the settings panel's Test connection, from a terminal; several ENDPOINTs (replicas of
one model) are probed at once, one line each. Exit 0 only when every one ranks correctly."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from ..core.endpoint_url import LIST_SEPARATOR
from ..core.probe_report import ProbeReport
from ..service import runtime
from .exits import FAILED, CliError
from .formatting import bold, number
from .options import add_server_options, as_options, server_config


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "probe", help="test a reranker server as the settings panel's Test connection does",
        description="Detect which API ENDPOINT speaks and check that it ranks a relevant document above an "
                    "irrelevant one. Exit code 0 only when it does.",
    )
    parser.add_argument("endpoints", metavar="ENDPOINT", nargs="+",
                        help="the server's base URL, e.g. http://127.0.0.1:7997; several for replicas of one model")
    add_server_options(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """When nothing answered, one line on stderr says why; else the report shows what the server did."""
    report = for_cli(runtime.probe(server_config(args, LIST_SEPARATOR.join(args.endpoints))))
    if args.json:
        print(json.dumps(report.as_dict(note=False), indent=2))
    elif not report.ok and not report.api and not report.replicas:
        raise CliError(report.message, FAILED)
    else:
        facts = replica_lines(report) if report.replicas else report_lines(report)
        print("\n".join([f"{bold('OK' if report.ok else 'FAIL')}  {report.message}", *facts]))
    return 0 if report.ok else FAILED


def for_cli(report: ProbeReport) -> ProbeReport:
    """The report naming each setting as the option a CLI user types (``rerank_api auto``: ``--api auto``)."""
    return dataclasses.replace(report, message=as_options(report.message),
                               attempts=tuple(as_options(attempt) for attempt in report.attempts),
                               replicas=tuple(for_cli(replica) for replica in report.replicas))


def report_lines(report: ProbeReport) -> list[str]:
    rows = [
        ("endpoint", report.endpoint),
        ("server", report.server or "-"),
        ("api", f"{report.api} at {report.path}  (POST {report.endpoint}{report.path})"),
        ("model", report.model or "(server default)"),
        ("latency", number(report.latency_ms, "g", " ms")),
        ("relevant", number(report.relevant_score)),
        ("irrelevant", number(report.irrelevant_score)),
        ("margin", number(report.margin, "+.3f")),
        *(("tried" if i == 0 else "", attempt) for i, attempt in enumerate(report.attempts)),
    ]
    return [f"  {name:<11}{value}" for name, value in rows]


def replica_lines(report: ProbeReport) -> list[str]:
    """One line per replica: its facts when it answered, and why when it does not rank correctly."""
    lines = []
    for position, r in enumerate(report.replicas, 1):
        facts = (f"  {r.api} at {r.path}  server {r.server or '-'}  latency {number(r.latency_ms, 'g', ' ms')}  "
                 f"margin {number(r.margin, '+.3f')}" if r.api else "")
        why = "" if r.ok else f"  {r.message}"
        lines.append(f"  {position:<3}{'OK' if r.ok else 'FAIL':<6}{r.endpoint}{facts}{why}")
    return lines
