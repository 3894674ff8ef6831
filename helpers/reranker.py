"""The programmatic API other plugins import: ``from usr.plugins.a0_reranker.helpers import reranker``.

    pairs = reranker.rerank(query, documents)          # [(orig_index, score), ...] best-first, or None
    pairs = await reranker.rerank_async(query, documents)

Both read this plugin's settings by default (``config=None``); a dict of ``rerank_*`` keys overrides
them for one call. Neither ever raises: None means "reranker unavailable, keep your prior order"
(no endpoint set, ``rerank_enabled`` off, bad settings, or any failure). ``rerank`` blocks and is safe
from any thread, also one whose own event loop is running; ``rerank_async`` is awaitable from any
event loop, and cancelling it never disturbs other callers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..a0_hooks.settings import resolve_config
from ..core.config import RerankerConfig
from ..core.errors import ConfigError
from ..service import runtime
from ..service.accounting import Accounting

__all__ = ["rerank", "rerank_async"]

log = logging.getLogger("a0_reranker")

Config = RerankerConfig | Mapping[str, Any] | None


def _config_or_none(config: Config) -> RerankerConfig | None:
    try:
        return resolve_config(config)
    except ConfigError as exc:
        log.warning("a0_reranker: settings are invalid, not reranking: %s", exc)
        Accounting().fell_back("config", str(exc))
    except Exception:
        log.exception("a0_reranker: could not read the settings, not reranking")
    return None


def rerank(query: str, documents: Sequence[str], *, config: Config = None) -> list[tuple[int, float]] | None:
    """Rerank ``documents`` for ``query``: best-first ``(original_index, score)``, or None. Blocking."""
    resolved = _config_or_none(config)
    return None if resolved is None else runtime.rerank(query, documents, config=resolved)


async def rerank_async(
    query: str, documents: Sequence[str], *, config: Config = None
) -> list[tuple[int, float]] | None:
    """Awaitable ``rerank``: best-first ``(original_index, score)``, or None."""
    resolved = _config_or_none(config)
    return None if resolved is None else await runtime.rerank_async(query, documents, config=resolved)
