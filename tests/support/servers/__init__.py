"""Loopback test servers that answer exactly as the real reranker servers do (their
API references and source, and answers captured from Infinity 0.0.78, vLLM 0.32.0 and llama.cpp on loopback).

    srv = await start_server("tei", scorer=lexical_scorer, max_client_batch_size=32)
    with serve_in_thread("vllm", error_style="old") as srv: ...

Each server records its requests, counts in-flight requests, holds them at ``srv.gate`` on
demand, and injects faults from ``srv.set_fault``.
"""

from __future__ import annotations

from .faults import (
    CloseKeptAlive,
    Delay,
    Disconnect,
    Fault,
    FaultRule,
    Hang,
    InvalidJson,
    Redirect,
    Respond,
    SizedBody,
    StallBody,
)
from .gate import Gate
from .qwen3_judge import DEFAULT_INSTRUCTION, PREFIX, SUFFIX
from .recording import RecordedRequest
from .registry import KINDS
from .runtime import RunningServer, serve_in_thread, start_server
from .scoring import Scorer, count_tokens, lexical_scorer, pair_tokens, to_logit

__all__ = [
    "DEFAULT_INSTRUCTION",
    "KINDS",
    "PREFIX",
    "SUFFIX",
    "CloseKeptAlive",
    "Delay",
    "Disconnect",
    "Fault",
    "FaultRule",
    "Gate",
    "Hang",
    "InvalidJson",
    "RecordedRequest",
    "Redirect",
    "Respond",
    "RunningServer",
    "Scorer",
    "SizedBody",
    "StallBody",
    "count_tokens",
    "lexical_scorer",
    "pair_tokens",
    "serve_in_thread",
    "start_server",
    "to_logit",
]
