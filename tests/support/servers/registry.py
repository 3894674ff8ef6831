"""Every server kind by name: ``KINDS[kind](scorer=..., **options)`` builds its protocol app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cohere import CohereApp
from .cohere_compatible import SiliconFlowApp, TogetherApp, XinferenceApp
from .infinity import InfinityApp
from .jina import JinaApp, LocalAIApp
from .litellm import LiteLLMApp
from .llamacpp import LlamaCppApp
from .mixedbread import MixedbreadApp
from .ollama import OllamaApp
from .protocol_app import ProtocolApp
from .sglang import SglangApp
from .tei import TeiApp
from .vllm import VllmApp, VllmQwen3App, VllmQwen3TemplatedApp
from .voyage import VoyageApp

_APPS: tuple[type[ProtocolApp], ...] = (
    CohereApp, JinaApp, VoyageApp, MixedbreadApp, TogetherApp, XinferenceApp, LocalAIApp,
    SiliconFlowApp, InfinityApp, TeiApp, VllmApp, VllmQwen3App, VllmQwen3TemplatedApp, LlamaCppApp, SglangApp,
    OllamaApp, LiteLLMApp,
)

KINDS: dict[str, Callable[..., ProtocolApp]] = {app.kind: app for app in _APPS}
"""Server kind name -> factory taking ``scorer=`` and the kind's options as keywords."""


def kind_names() -> list[str]:
    return sorted(KINDS)


def build(kind: str, **options: Any) -> ProtocolApp:
    """The protocol app for ``kind``; ValueError names the known kinds."""
    if kind not in KINDS:
        raise ValueError(f"unknown server kind {kind!r}; known: {', '.join(kind_names())}")
    return KINDS[kind](**options)
