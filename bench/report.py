"""What ``bench`` prints and writes: the table, the JSON document and the PNG plot (matplotlib, optional)."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path
from typing import Any

from .. import __version__
from ..cli.formatting import table
from .batching_bench import BenchResult

INSTALL_HINT = "pip install -e '.[bench]'  (or: pip install matplotlib)"


def bench_table(result: BenchResult) -> list[str]:
    def requests(value: float) -> str:
        return "n/a" if value < 0 else f"{value:g}"

    rows = [
        (f"{r['concurrency']:g}", f"{r['naive_recalls_per_s']:.1f}", f"{r['batched_recalls_per_s']:.1f}",
         f"{r['throughput_ratio']:.2f}x", f"{r['naive_p95_ms']:.1f}", f"{r['batched_p95_ms']:.1f}",
         f"{requests(r['naive_requests'])} / {requests(r['batched_requests'])}")
        for r in result.rows()
    ]
    headers = ("concurrency", "naive rec/s", "batched rec/s", "speed-up", "naive p95 ms", "batched p95 ms",
               "HTTP requests naive / batched")
    return table(headers, rows, ">>>>>>>")


def bench_document(result: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's JSON document: the run's settings and environment, then the benchmark's own result."""
    environment = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"tool": f"a0-reranker {__version__} bench", "created": created, "environment": environment,
            **meta, **result}


def write_plot(result: BenchResult, path: Path, title: str) -> bool:
    """Throughput and p95 latency against concurrency, naive and batched; False without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return False
    rows = result.rows()
    levels = [r["concurrency"] for r in rows]
    figure = Figure(figsize=(9, 3.6), dpi=100, layout="constrained")
    throughput, latency = figure.subplots(1, 2)
    for axes, key, label in ((throughput, "recalls_per_s", "recalls per second (higher is better)"),
                             (latency, "p95_ms", "p95 latency, ms (lower is better)")):
        axes.plot(levels, [r[f"naive_{key}"] for r in rows], "o-", color="#c44e52", label="naive: 1 request per recall")
        axes.plot(levels, [r[f"batched_{key}"] for r in rows], "o-", color="#4c72b0", label="micro-batched")
        axes.set_xscale("log", base=2)
        axes.set_xticks(levels, [str(c) for c in levels])
        axes.minorticks_off()
        axes.set_xlabel("concurrent recalls")
        axes.set_title(label, fontsize=10)
        axes.grid(alpha=0.3)
        axes.set_ylim(bottom=0)
    throughput.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.savefig(path, pil_kwargs={"optimize": True})
    return True
