"""The programmatic API other plugins import: ``from usr.plugins.a0_reranker.helpers import reranker``.

    pairs = reranker.rerank(query, documents)          # [(orig_index, score), ...] best-first, or None
    pairs = await reranker.rerank_async(query, documents)

Both read this plugin's settings by default (``config=None``); a dict of ``rerank_*`` keys overrides
them for one call. Neither ever raises: None means "reranker unavailable, keep your prior order"
(no endpoint set, ``rerank_enabled`` off, bad settings, or any failure). ``rerank`` blocks and is safe
from any thread, also one whose own event loop is running; ``rerank_async`` is awaitable from any
event loop, and cancelling it never disturbs other callers.

The scores' scale: by default (``scale="server"``) each server's own, as this API always returned
them: probabilities in [0, 1] from most (vLLM, TEI, Infinity, the hosted APIs), the model's raw
output from llama.cpp (logits for a BERT-style GGUF). ``scale="probability"`` puts every server's on
the one 0-1 scale the memory recall's ``rerank_min_score`` is compared on, so one threshold means the
same on every server. The order is the same either way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..a0_hooks.settings import resolve_config
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
    """Rerank ``documents`` for ``query``: best-first ``(original_index, score)``, or None. Blocking.
    ``scale``: ``"server"`` (the server's own scores) or ``"probability"`` (0-1, as the floor)."""
    resolved = _config_or_none(config, scale)
    return None if resolved is None else _scaled(runtime.rerank_result(query, documents, config=resolved), scale)


async def rerank_async(
    query: str, documents: Sequence[str], *, config: Config = None, scale: Scale = "server"
) -> list[tuple[int, float]] | None:
    """Awaitable ``rerank``: best-first ``(original_index, score)``, or None."""
    resolved = _config_or_none(config, scale)
    if resolved is None:
        return None
    return _scaled(await runtime.rerank_result_async(query, documents, config=resolved), scale)


def _scaled(result: RerankResult, scale: Scale) -> list[tuple[int, float]] | None:
    if result.ranking is None or scale == "server":
        return result.ranking
    return on_probability_scale(result.ranking, result.scale)
