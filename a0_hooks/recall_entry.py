"""Where a recall enters from A0, and what it reads there (state: the recall scope, the stores tapped,
the parsed defaults and the configs kept for settings seen before). Our extensions and the wrapper call
it on every recall; ``memory_patch`` puts the wrapper and the tap on and takes them off.

The wrapper on ``Memory.search_similarity_threshold`` is thin and stable: every call looks up
``recall_search`` by name and hands it the original, so a wrapper made before A0 purged our modules runs
the code imported after the purge, and calls the original alone once our code cannot be imported (the
plugin folder was deleted). ``ensure_installed`` re-checks it before every recall (A0 may have replaced
the class, an update unwrapped it): cheaply, when this copy's wrapper is on top. The tap on the store's
``_aembed_query`` lets the pool search reuse the query vector A0's own call computed (often through a
remote API) instead of embedding the same query again; it carries its own ContextVar.

The recall scope: our extensions open it just before A0's ``_50_recall_memories`` and close it just
after; the search task ``_50`` starts in between keeps a copy (ContextVars are copied into
``create_task``). Deletion, consolidation, the dashboard and memorize never see it: they run stock. Its
ContextVar lives in the process-wide anchor, for a wrapper made before a purge. A0 does not catch what
extensions raise, so every seam swallows and logs its own errors.

Settings: A0's ``get_plugin_config`` returns the first ``config.json`` along the project, agent-profile
and global scopes, or the defaults, unmerged: a file saved by an older version lacks newer keys, so we
merge it over ``default_config.yaml``. A recall reads its own agent's (a sub-agent's profile may name
another reranker); outside A0, the plugin folder's ``config.json``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from ..core.config import DEFAULT_CONFIG_FILE, RerankerConfig, load_default_settings, settings_keys
from ..core.errors import ConfigError
from ..process.singletons import PerProcess
from . import PLUGIN_NAME, memory_patch
from .memory_patch import EMBED_METHOD, MARKER, MEMO, METHOD, OWN

log = logging.getLogger("a0_reranker")
T = TypeVar("T")
RECALL_MODULE: Final = __name__.rsplit(".", 1)[0] + ".recall_search"
_THIS_COPY: Final = object()  # identity of this module copy: a wrapper carrying another one is stale


def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    """An async method with the original's name and signature that routes through the recall code."""
    warned: list[bool] = []  # log a missing recall module once per wrapper, not on every search

    async def _a0_reranker_search(self: Any, *args: Any, **kwargs: Any) -> Any:
        recall = _recall_code(RECALL_MODULE, warned)
        if recall is None:
            return await original(self, *args, **kwargs)
        return await recall.search(original, self, args, kwargs)

    wrapper = functools.update_wrapper(_a0_reranker_search, original, updated=())
    setattr(wrapper, MARKER, _THIS_COPY)
    return wrapper


def _recall_code(name: str, warned: list[bool]) -> Any | None:
    """The recall module as it is imported now, or None if it cannot be (plugin gone, deps missing)."""
    try:
        return sys.modules.get(name) or importlib.import_module(name)
    except Exception:
        if not warned:
            warned.append(True)
            log.warning("a0_reranker: recall code unavailable, memory search runs stock", exc_info=True)
        return None


def is_current(func: Any) -> bool:
    """A wrapper made by this very copy of the module."""
    return memory_patch.is_ours(func) and getattr(func, MARKER) is _THIS_COPY


def ensure_installed() -> bool:
    """Wrap the ``Memory`` class A0 uses now unless this copy's wrapper is on top. True when it is."""
    cls = getattr(sys.modules.get(memory_patch.MEMORY_MODULE), "Memory", None)
    if getattr(getattr(cls, METHOD, None), MARKER, None) is _THIS_COPY:
        return True  # the recall's case: nothing to do
    return memory_patch.install(make_wrapper, _THIS_COPY)


def _memo_of(store: Any) -> ContextVar[dict[str, Any] | None] | None:
    """The ContextVar of the tap on ``store``, tapping it first; None for a store without that step."""
    embed = getattr(store, EMBED_METHOD, None)
    if isinstance(found := getattr(embed, MEMO, None), ContextVar):
        return found
    if embed is None or not inspect.iscoroutinefunction(embed):
        return None
    memo: ContextVar[dict[str, Any] | None] = ContextVar("a0_reranker_query_embedding", default=None)

    async def _a0_reranker_embed_query(text: Any, *args: Any, **kwargs: Any) -> Any:
        vectors = memo.get()
        if vectors is None or args or kwargs or not isinstance(text, str):
            return await embed(text, *args, **kwargs)
        if text not in vectors:
            vectors[text] = await embed(text)
        return vectors[text]

    tap = functools.update_wrapper(_a0_reranker_embed_query, embed, updated=())
    setattr(tap, MEMO, memo)
    setattr(tap, OWN, EMBED_METHOD in vars(store))
    setattr(store, EMBED_METHOD, tap)
    return memo


@contextmanager
def shared_query_embedding(memory: Any) -> Iterator[None]:
    """Inside the block, the store of ``memory`` embeds each query text once. Never raises of its own."""
    try:
        memo = _memo_of(getattr(memory, "db", None))
    except Exception:  # a store that takes no attribute, or a descriptor that fails: embed as usual
        log.debug("a0_reranker: cannot share the query embedding on this store", exc_info=True)
        memo = None
    if memo is None:
        yield
        return
    token = memo.set({})
    try:
        yield
    finally:
        memo.reset(token)


# --- the recall scope, and the seams our A0 extensions call --------------------------------------------

Source = Literal["recall", "memory_load"]


@dataclass(frozen=True)
class RecallScope:
    """A search in this context is a recall of ``agent`` (read by attribute: a purge re-creates the class)."""

    agent: Any
    source: Source


_RECALL: Final[PerProcess[ContextVar[RecallScope | None]]] = PerProcess(
    "recall_scope", lambda: ContextVar("a0_reranker_recall_scope", default=None))


def current() -> RecallScope | None:
    """The scope of the running context, or None outside recall."""
    return _RECALL.get().get()


def begin(agent: Any, source: Source) -> None:
    """Mark the searches that follow in this context (and tasks started from it) as a recall."""
    _RECALL.get().set(RecallScope(agent, source))


def end() -> None:
    """Leave the scope. A plain reset to None, not a token reset: a scope left over by a failed
    ``memory_load`` must not come back when the next recall ends."""
    try:
        _RECALL.get().set(None)
    except Exception:
        log.exception("a0_reranker: could not close the recall scope")


@contextmanager
def suspended() -> Iterator[None]:
    """No scope inside the block: the pool fetch must not be reranked by a nested wrapper."""
    var = _RECALL.get()
    token = var.set(None)
    try:
        yield
    finally:
        var.reset(token)


def before_recall(agent: Any) -> None:  # message_loop_prompts_after/_49: re-check the wrapper, open
    _open(agent, "recall")


def after_recall(agent: Any) -> None:
    """``_51``: close the scope in the loop's own context, so memorize and consolidation started later at
    ``monologue_end`` do not inherit it (the recall task kept its copy)."""
    end()


def before_tool(agent: Any, tool_name: str | None) -> None:  # the memory_load tool's search is a recall too
    if tool_name == "memory_load":
        _open(agent, "memory_load")


def after_tool(agent: Any, tool_name: str | None) -> None:
    if tool_name == "memory_load":
        end()


def on_monologue_end(agent: Any) -> None:
    """Before memorize starts its background task: clear a scope that a failed recall or tool left open
    (A0 skips the later extensions of a point when one raises)."""
    end()


def _open(agent: Any, source: Source) -> None:
    try:
        ensure_installed()
        begin(agent, source)
    except Exception:
        log.exception("a0_reranker: could not open the %s scope", source)


# --- the agent's settings ------------------------------------------------------------------------------
def a0_plugins() -> Any | None:
    """A0's ``helpers.plugins`` module, or None outside Agent Zero."""
    try:
        plugins = importlib.import_module("helpers.plugins")
    except Exception:
        return None
    return plugins if callable(getattr(plugins, "get_plugin_config", None)) else None


def from_a0(fallback: T, what: str, ask: Callable[[Any], T]) -> T:
    """``ask(helpers.plugins)``, or ``fallback`` outside A0 or when A0 raises (logged: ``what`` was asked)."""
    plugins = a0_plugins()
    try:
        return fallback if plugins is None else ask(plugins)
    except Exception:
        log.debug("a0_reranker: could not read %s", what, exc_info=True)
        return fallback


def enabled_for(agent: Any) -> bool:
    """The plugin is switched on in this agent's scope (False outside A0 or on error). Asked each time:
    A0 calls no hook on disable."""
    return from_a0(False, "the enabled plugins", lambda plugins: PLUGIN_NAME in plugins.get_enabled_plugins(agent))


def saved_settings(agent: Any = None, **scope: str) -> dict[str, Any]:
    """What the user saved for the agent's scope, or for the named ``project_name`` and ``agent_profile``
    (A0's lookup), without defaults."""
    plugins = a0_plugins()
    if plugins is None:
        return _read_json()
    found = plugins.get_plugin_config(PLUGIN_NAME, agent, **scope)
    return dict(found) if isinstance(found, Mapping) else {}


def plugin_settings(agent: Any = None, **scope: str) -> dict[str, Any]:
    """Defaults, then the saved settings of the agent's (or the named) scope on top."""
    return {**_defaults(os.stat(DEFAULT_CONFIG_FILE).st_mtime_ns), **saved_settings(agent, **scope)}


@functools.lru_cache(maxsize=1)
def _defaults(mtime_ns: int) -> dict[str, Any]:
    """``default_config.yaml`` as parsed once per version of the file: every recall reads it."""
    return load_default_settings()


def resolve_config(config: RerankerConfig | Mapping[str, Any] | None = None, agent: Any = None) -> RerankerConfig:
    """The config a call uses: ``None`` = the plugin's settings; a dict overrides them; a config is used
    as is. Raises ``ConfigError`` naming every bad key (or ``config`` itself when it is neither)."""
    if isinstance(config, RerankerConfig):
        return config
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError([f"config: expected a dict of rerank_* settings or a RerankerConfig, "
                           f"got {type(config).__name__}"])
    return config_from_settings({**plugin_settings(agent), **(config or {})})


def config_from_settings(settings: Mapping[str, Any]) -> RerankerConfig:
    """``RerankerConfig.from_settings``, kept for settings seen before (validating them on every recall
    cost more than the rest of its work before the hand-over); values that are not JSON are not kept."""
    try:
        key = json.dumps([settings.get(name) for name in _SETTING_KEYS])
    except (TypeError, ValueError):
        return RerankerConfig.from_settings(settings)
    return _config_from_json(key)


@functools.lru_cache(maxsize=64)
def _config_from_json(key: str) -> RerankerConfig:
    return RerankerConfig.from_settings(dict(zip(_SETTING_KEYS, json.loads(key), strict=True)))


_SETTING_KEYS: Final = tuple(settings_keys())


def _read_json() -> dict[str, Any]:
    path = DEFAULT_CONFIG_FILE.parent / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("a0_reranker: ignoring unreadable %s: %s", path.name, exc)
        return {}
    return data if isinstance(data, dict) else {}
