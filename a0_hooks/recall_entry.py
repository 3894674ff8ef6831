"""Where a recall enters from A0, and what it reads there (state: the recall scope, the stores tapped, the
parsed defaults and cached configs). The wrapper looks ``recall_search`` up on every call, so one made before
a purge runs the code imported after it, and the original alone once the plugin is gone. The tap on the store's
``_aembed_query`` lets the pool search reuse A0's query vector. The scope is open only around A0's
``_50_recall_memories`` (whose task keeps a copy), so deletion, consolidation and memorize run stock. A0 does
not catch what extensions raise, so every seam logs its own errors.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from ..core.config import RerankerConfig, settings_keys
from ..core.errors import ConfigError
from ..process.singletons import PerProcess
from . import PLUGIN_NAME, memory_patch
from .memory_patch import EMBED_METHOD, MARKER, MEMO, METHOD, OWN, WRAPPER_CODE_NAME
from .settings_modal import DEFAULT_CONFIG_FILE, load_default_settings

log = logging.getLogger("a0_reranker")
T = TypeVar("T")
RECALL_MODULE: Final = __name__.rsplit(".", 1)[0] + ".recall_search"
_THIS_COPY: Final = object()  # identity of this module copy: a wrapper carrying another one is stale


def make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    """An async method with the original's name and signature that routes through the recall code."""
    warned: list[bool] = []  # log a missing recall module once per wrapper

    async def _a0_reranker_search(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:  # the recall module as imported now (a purge re-imports it); gone or its deps missing: stock
            recall = sys.modules.get(RECALL_MODULE) or importlib.import_module(RECALL_MODULE)
        except Exception:
            if not warned:
                warned.append(True)
                log.warning("a0_reranker: recall code unavailable, memory search runs stock", exc_info=True)
        else:
            return await recall.search(original, self, args, kwargs)
        return await original(self, *args, **kwargs)

    wrapper = functools.update_wrapper(_a0_reranker_search, original, updated=())
    setattr(wrapper, MARKER, _THIS_COPY)
    return wrapper


def is_current(func: Any) -> bool:
    """A wrapper made by this very copy of the module (checked here: a warm recall stays out of ``memory_patch``)."""
    code = getattr(func, "__code__", None)
    return getattr(func, MARKER, None) is _THIS_COPY and getattr(code, "co_name", "") == WRAPPER_CODE_NAME


def ensure_installed() -> bool:
    """Wrap the ``Memory`` class A0 uses now unless this copy's wrapper is on top (a recall's case); True if on."""
    cls = getattr(sys.modules.get(memory_patch.MEMORY_MODULE), "Memory", None)
    return is_current(getattr(cls, METHOD, None)) or memory_patch.install(make_wrapper, is_current)


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


def shared_query_embedding(memory: Any) -> AbstractContextManager[None]:
    """Inside the block, the store of ``memory`` embeds each query text once. Never raises of its own."""
    try:
        memo = _memo_of(getattr(memory, "db", None))
    except Exception:  # a store that takes no attribute, or a descriptor that fails: embed as usual
        log.debug("a0_reranker: cannot share the query embedding on this store", exc_info=True)
        memo = None
    return nullcontext() if memo is None else _set_within(memo, {})


@contextmanager
def _set_within(var: ContextVar[T], value: T) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


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
    return _RECALL.get().get()


def begin(agent: Any, source: Source) -> None:
    """Mark the searches that follow in this context (and tasks started from it) as a recall."""
    _RECALL.get().set(RecallScope(agent, source))


def end() -> None:
    """Leave the scope: set to None, not reset by token, so a failed ``memory_load``'s scope cannot come back."""
    try:
        _RECALL.get().set(None)
    except Exception:
        log.exception("a0_reranker: could not close the recall scope")


def suspended() -> AbstractContextManager[None]:
    """No scope inside the block: the pool fetch must not be reranked by a nested wrapper."""
    return _set_within(_RECALL.get(), None)


# The seams our extension files call. Their names are a contract across versions: after an update without a
# purge of our modules, A0 reloads the new extension files, which then call the modules it still holds.
def before_recall(agent: Any) -> None:  # message_loop_prompts_after/_49
    _open(agent, "recall")


def after_recall(agent: Any) -> None:
    """``_51``: close it in the loop's context, so tasks started at ``monologue_end`` do not inherit it."""
    end()


def before_tool(agent: Any, tool_name: str | None) -> None:  # the memory_load tool's search is a recall too
    if tool_name == "memory_load":
        _open(agent, "memory_load")


def after_tool(agent: Any, tool_name: str | None) -> None:
    if tool_name == "memory_load":
        end()


def on_monologue_end(agent: Any) -> None:
    """Before memorize starts: clear a scope a failed step left open (A0 skips later extensions on a raise)."""
    end()


def _open(agent: Any, source: Source) -> None:
    try:
        ensure_installed()
        begin(agent, source)
    except Exception:
        log.exception("a0_reranker: could not open the %s scope", source)


# --- the agent's settings ------------------------------------------------------------------------------
def a0_plugins() -> Any | None:
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
    """The plugin is on in this agent's scope (False outside A0 or on error); A0 calls no hook on disable."""
    return from_a0(False, "the enabled plugins", lambda plugins: PLUGIN_NAME in plugins.get_enabled_plugins(agent))


def plugin_settings(agent: Any = None, **scope: str) -> dict[str, Any]:
    """The defaults, then the saved settings of the agent's (or the named) scope: A0 returns the first saved
    ``config.json`` of the scopes unmerged, and an older one lacks newer keys. Outside A0: the plugin folder's."""
    plugins = a0_plugins()
    saved = _read_json() if plugins is None else plugins.get_plugin_config(PLUGIN_NAME, agent, **scope)
    return {**default_settings(), **(saved if isinstance(saved, Mapping) else {})}


def default_settings() -> dict[str, Any]:
    """``default_config.yaml``, parsed once per version of the file (every recall reads it). Do not mutate."""
    return _parsed_defaults(DEFAULT_CONFIG_FILE.stat().st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _parsed_defaults(mtime_ns: int) -> dict[str, Any]:
    return load_default_settings()


def resolve_config(config: RerankerConfig | Mapping[str, Any] | None = None, agent: Any = None) -> RerankerConfig:
    """``None``: the plugin's settings; a dict overrides them; a config is used as is. ``ConfigError`` names
    every bad key (or ``config`` itself when it is neither)."""
    if isinstance(config, RerankerConfig):
        return config
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError([f"config: expected a dict of rerank_* settings or a RerankerConfig, "
                           f"got {type(config).__name__}"])
    return config_from_settings({**plugin_settings(agent), **(config or {})})


def config_from_settings(settings: Mapping[str, Any]) -> RerankerConfig:
    """``RerankerConfig.from_settings``, cached by the settings' JSON: validating on every recall cost more
    than the rest of its work before the hand-over."""
    try:
        key = json.dumps([settings.get(name) for name in _SETTING_KEYS])
    except (TypeError, ValueError):
        return RerankerConfig.from_settings(settings)
    return _config_from_json(key)


@functools.lru_cache(maxsize=64)
def _config_from_json(key: str) -> RerankerConfig:
    return RerankerConfig.from_settings(dict(zip(_SETTING_KEYS, json.loads(key), strict=True)))


_SETTING_KEYS: Final = tuple(settings_keys())


def _read_json() -> Any:
    path = DEFAULT_CONFIG_FILE.parent / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("a0_reranker: ignoring unreadable %s: %s", path.name, exc)
        return {}
