"""What the demo shows, and its terminal page: the setting, the recall before and after, what changed."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ..core.probe_report import ProbeReport
from ..core.statistics import PoolStatistics
from ..demo import memories
from ..service.runtime import RecallOutcome
from .formatting import bold, table, terminal_width


@dataclass(frozen=True)
class DemoRun:
    """Everything the demo shows: which server, its probe, the stock order and the reranked outcome."""

    endpoint: str
    embedded: bool
    probe: ProbeReport
    stock: list[tuple[int, float]]  # (memory index, similarity), best first
    outcome: RecallOutcome[str]
    limit: int
    pool: PoolStatistics  # the engine's pool counters after the recall (what the status tool shows in A0)


def render(demo: DemoRun, scorer_label: str) -> str:
    width = terminal_width()
    lines = [bold("a0-reranker demo: one memory recall, before and after reranking"), ""]
    lines += _setting(demo, scorer_label, width)
    lines += ["", bold("BEFORE") + "  plain embedding recall (stand-in: bag-of-words cosine, one vector per memory)"]
    lines += _before(demo, width)
    lines += ["", bold("AFTER") + f"   reranked by the plugin's recall path (rerank_pool over all {len(demo.stock)} "
              f"candidates, {demo.outcome.elapsed_s * 1000:.0f} ms)"]
    lines += _after(demo, width)
    lines += ["", *textwrap.wrap(_verdict(demo), width)]
    if demo.embedded:
        lines += ["", "Try your own server:  a0-reranker demo --endpoint http://HOST:PORT   "
                      "(or: a0-reranker probe http://HOST:PORT)"]
    return "\n".join(lines)


def _setting(demo: DemoRun, scorer_label: str, width: int) -> list[str]:
    if demo.embedded:
        server = [f"embedded demo server {demo.endpoint} (Infinity's API: POST /rerank, GET /models)",
                  f"scorer: {scorer_label}"]
    else:
        server = [f"your server at {demo.endpoint}"]
    rows = [("question", [memories.QUERY]),
            ("memories", [f"{len(demo.stock)} sample memories; the recall keeps the best {demo.limit}"]),
            ("reranker", server),
            ("detected", [demo.probe.message])]
    return [f"  {name if i == 0 else '':<10}{line}" for name, texts in rows
            for i, line in enumerate(line for text in texts for line in textwrap.wrap(text, width - 12))]


def _before(demo: DemoRun, width: int) -> list[str]:
    rows = [(f"{p}", f"{similarity:.3f}", memories.MEMORIES[index])
            for p, (index, similarity) in enumerate(demo.stock, 1)]
    lines = _indent(table(("#", "similarity", "memory"), rows, ">><", width - 2))
    cut = f"  {'-' * 4} the recall keeps the {demo.limit} above {'-' * 4}"
    return [lines[0], *lines[1 : demo.limit + 1], cut, *lines[demo.limit + 1 :]] if demo.limit < len(rows) else lines


def _after(demo: DemoRun, width: int) -> list[str]:
    ranking = (demo.outcome.ranking or [])[: demo.limit]
    rows = [(f"{p:2d}", f"{score:.3f}", f"#{index + 1}", memories.MEMORIES[demo.stock[index][0]])
            for p, (index, score) in enumerate(ranking, 1)]
    return _indent(table(("#", "score", "was", "memory"), rows, ">>><", width - 2))


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def _verdict(demo: DemoRun) -> str:
    ranking = demo.outcome.ranking or []
    change = demo.outcome.change
    if change is None or not ranking:
        return "The reranker did not change the recall."
    top_was = ranking[0][0] + 1
    replaced = change.replaced
    top = "kept its top memory" if top_was == 1 else f"the new top memory was #{top_was} in embedding order"
    return (f"{bold('Result:')} {replaced} of the {change.limit} recalled memories were replaced "
            f"(rescued from further down the pool); {top}.")
