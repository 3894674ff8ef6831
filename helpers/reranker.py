"""The programmatic API other plugins import: ``from usr.plugins.a0_reranker.helpers import reranker``.

    pairs = reranker.rerank(query, documents)          # [(orig_index, score), ...] best-first, or None
    pairs = await reranker.rerank_async(query, documents)

Both read this plugin's settings unless ``config`` (a dict of ``rerank_*`` keys) overrides them, and
never raise: None means "reranker unavailable, keep your prior order". ``rerank`` blocks and is safe
from any thread, also one running its own event loop; cancelling ``rerank_async`` disturbs no other
caller. ``scale="server"`` (the default) returns each server's own scores: probabilities from most,
llama.cpp's raw logits; ``scale="probability"`` puts them all on the 0-1 scale ``rerank_min_score`` is
compared on. The order is the same either way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..a0_hooks.recall_entry import resolve_config
from ..core.config import RerankerConfig
from ..core.errors import ConfigError
from ..core.scores import on_probability_scale
from ..service import runtime
from ..service.calls import RerankResult, stats_recorder

__all__ = ["rerank", "rerank_async"]

log = logging.getLogger("a0_reranker")

Config = RerankerConfig | Mapping[str, Any] | None
Scale = Literal["server", "probability"]
SCALES = ("server", "probability")


def _config_or_none(config: Config, scale: Any) -> RerankerConfig | None:
    if scale not in SCALES:  # checked first: a mistake of the caller's, not a fallback of the reranker's
        log.warning("a0_reranker: scale must be one of %s, not %r; not reranking", ", ".join(SCALES), scale)
        return None
    try:
        return resolve_config(config)
    except ConfigError as exc:
        log.warning("a0_reranker: settings are invalid, not reranking: %s", exc)
        stats_recorder().fell_back("config", str(exc))
    except Exception:
        log.exception("a0_reranker: could not read the settings, not reranking")
    return None


def rerank(query: str, documents: Sequence[str], *, config: Config = None,
           scale: Scale = "server") -> list[tuple[int, float]] | None:
    """Best-first ``(original_index, score)`` of ``documents`` for ``query``, or None. Blocking."""
    resolved = _config_or_none(config, scale)
    return None if resolved is None else _scaled(runtime.rerank_result(query, documents, config=resolved), scale)


async def rerank_async(query: str, documents: Sequence[str], *, config: Config = None,
                       scale: Scale = "server") -> list[tuple[int, float]] | None:
    """Awaitable ``rerank``: best-first ``(original_index, score)``, or None."""
    resolved = _config_or_none(config, scale)
    if resolved is None:
        return None
    return _scaled(await runtime.rerank_result_async(query, documents, config=resolved), scale)


def _scaled(result: RerankResult, scale: Scale) -> list[tuple[int, float]] | None:
    if result.ranking is None or scale == "server":
        return result.ranking
    return on_probability_scale(result.ranking, result.scale)
