"""Which settings a recall uses, and which memory searches are a recall (state: the recall scope, and
the parsed defaults and configs kept for settings seen before).

Settings: A0's ``get_plugin_config(name, agent)`` returns the first ``config.json`` found along the
project, agent-profile and global scopes, or the defaults, and never merges: a file saved by an older
version lacks newer keys, so we merge it over ``default_config.yaml``. A recall reads its own agent's
settings (a sub-agent's profile may name another reranker, or none); without an agent, a ``Scope``
names a project and an agent profile as A0's settings modal selects them. Outside A0 the plugin
folder's own ``config.json`` is read if present. A0 calls no hook on disable, so ``enabled_for`` asks
at the time of use. Every recall reads its settings: kept here, a warm recall runs no ``core.config``.

The recall scope: our extensions set it just before A0's ``_50_recall_memories`` and clear it just
after; the search task ``_50`` starts in between keeps a copy (ContextVars are copied into
``create_task``). Deletion, consolidation, the dashboard and memorize never see it, so the memory
wrapper passes those straight through. Its ContextVar lives in the process-wide anchor: A0 purges
``usr.plugins.*`` modules at runtime, and a wrapper installed before a purge must read the variable our
re-imported extensions write after it. A0 does not catch exceptions raised by extensions, so every
seam swallows and logs its own errors.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from ..core.config import DEFAULT_CONFIG_FILE, RerankerConfig, load_default_settings, settings_keys
from ..core.errors import ConfigError
from ..core.recall_budget import NO_LLM_STEPS, RecallSteps
from ..process.singletons import PerProcess
from . import PLUGIN_NAME, memory_patch

log = logging.getLogger("a0_reranker")
MEMORY_PLUGIN: Final = "_memory"
T = TypeVar("T")


def a0_plugins() -> Any | None:
    """A0's ``helpers.plugins`` module, or None outside Agent Zero."""
    try:
        plugins = importlib.import_module("helpers.plugins")
    except Exception:
        return None
    return plugins if callable(getattr(plugins, "get_plugin_config", None)) else None


def _from_a0(fallback: T, what: str, ask: Callable[[Any], T]) -> T:
    """``ask(helpers.plugins)``, or ``fallback`` outside A0 or when A0 raises (logged: ``what`` was asked)."""
    plugins = a0_plugins()
    if plugins is None:
        return fallback
    try:
        return ask(plugins)
    except Exception:
        log.debug("a0_reranker: could not read %s", what, exc_info=True)
        return fallback


def enabled_for(agent: Any) -> bool:
    """The plugin is switched on in this agent's scope (False outside A0 or on error)."""
    return _from_a0(False, "the enabled plugins", lambda plugins: PLUGIN_NAME in plugins.get_enabled_plugins(agent))


def enabled_in(project_name: str, agent_profile: str) -> bool:
    """The toggle of a named scope as A0's settings modal reads it: the first ``.toggle-1``/``.toggle-0``
    found from that scope up to the global one (none: on). False outside A0 or on error."""
    def toggled_on(plugins: Any) -> bool:
        found = plugins.find_plugin_assets(plugins.TOGGLE_FILE_PATTERN, plugin_name=PLUGIN_NAME,
                                           project_name=project_name, agent_profile=agent_profile, only_first=True)
        return not found or not str(found[0].get("path", "")).endswith(".toggle-0")
    return _from_a0(False, "the toggle of a scope", toggled_on)


def installed() -> bool:
    """The plugin folder is still there (a manual ``rm -rf`` calls no hook)."""
    return _from_a0(False, "the plugin folder", lambda plugins: plugins.find_plugin_dir(PLUGIN_NAME) is not None)


_SCOPE_NAME: Final = re.compile(r"^(?!\.{1,2}$)[^/\\\x00]{0,255}$")  # one folder name (or "" for all): no path


@dataclass(frozen=True)
class Scope:
    """A project and an agent profile by name; ``""`` is A0's "Global" and "All profiles"."""

    project_name: str = ""
    agent_profile: str = ""

    def __post_init__(self) -> None:
        for name in (self.project_name, self.agent_profile):
            if not isinstance(name, str) or not _SCOPE_NAME.match(name):
                raise ValueError(f"not a project or agent profile name: {name!r}")

    @property
    def is_global(self) -> bool:
        return not (self.project_name or self.agent_profile)


def scope_labels(scope: Scope) -> dict[str, str]:
    """The scope's names as A0's modal shows them (a project's title, a profile's label), else the names."""
    return {"project_label": _label(scope.project_name, "projects", "get_active_projects_list", "name", "title"),
            "agent_profile_label": _label(scope.agent_profile, "subagents", "get_all_agents_list", "key", "label")}


def _label(name: str, module: str, lister: str, key: str, field: str) -> str:
    if not name:
        return ""
    try:
        entries = getattr(importlib.import_module(f"helpers.{module}"), lister)()
        return {str(e.get(key)): str(e.get(field) or "") for e in entries}.get(name) or name
    except Exception:  # outside A0, or A0 could not list them: the name says it
        log.debug("a0_reranker: could not read the scope's labels", exc_info=True)
        return name


def _config_of(plugins: Any, plugin: str, agent: Any, scope: Scope | None) -> Any:
    """A0's ``get_plugin_config`` for the agent's scope, or for ``scope``."""
    if scope is None or scope.is_global:
        return plugins.get_plugin_config(plugin, agent)
    return plugins.get_plugin_config(plugin, agent, project_name=scope.project_name,
                                     agent_profile=scope.agent_profile)


def saved_settings(agent: Any = None, scope: Scope | None = None) -> dict[str, Any]:
    """What the user saved for the agent's scope, or for ``scope`` (A0's lookup), without defaults."""
    plugins = a0_plugins()
    if plugins is None:
        return _read_json()
    found = _config_of(plugins, PLUGIN_NAME, agent, scope)
    return dict(found) if isinstance(found, Mapping) else {}


def recall_steps(agent: Any = None, scope: Scope | None = None) -> RecallSteps:
    """Which of A0's LLM recall steps are on for the agent's (or ``scope``'s) ``_memory`` settings: they
    spend part of the recall's time limit before and after our searches. None outside A0 or on error."""
    found = _from_a0(None, "the _memory settings", lambda plugins: _config_of(plugins, MEMORY_PLUGIN, agent, scope))
    if not isinstance(found, Mapping):
        return NO_LLM_STEPS
    return RecallSteps(query_prep=found.get("memory_recall_query_prep") is True,
                       post_filter=found.get("memory_recall_post_filter") is True)


def plugin_settings(agent: Any = None, scope: Scope | None = None) -> dict[str, Any]:
    """Defaults, then the saved settings of the agent's (or ``scope``'s) scope on top."""
    return {**_defaults(os.stat(DEFAULT_CONFIG_FILE).st_mtime_ns), **saved_settings(agent, scope)}


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


# --- the recall scope, and the seams our A0 extensions call --------------------------------------------

Source = Literal["recall", "memory_load"]
MEMORY_LOAD_TOOL: Final = "memory_load"


@dataclass(frozen=True)
class RecallScope:
    """A search in this context is a recall of ``agent`` (read by attribute only: a module purge
    re-creates the class)."""

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


def on_startup() -> None:  # startup_migration: wrap the memory search before the first chat
    _install("startup")


def on_agent_init(agent: Any) -> None:  # every new agent, subordinates included
    _install("agent_init")


def before_recall(agent: Any) -> None:  # message_loop_prompts_after/_49: re-check the wrapper, open
    _open(agent, "recall")


def after_recall(agent: Any) -> None:
    """``_51``: close the scope in the loop's own context, so memorize and consolidation started later at
    ``monologue_end`` do not inherit it (the recall task kept its copy)."""
    end()


def before_tool(agent: Any, tool_name: str | None) -> None:  # the memory_load tool's search is a recall too
    if tool_name == MEMORY_LOAD_TOOL:
        _open(agent, "memory_load")


def after_tool(agent: Any, tool_name: str | None) -> None:
    if tool_name == MEMORY_LOAD_TOOL:
        end()


def on_monologue_end(agent: Any) -> None:
    """Before memorize starts its background task: clear a scope that a failed recall or tool left open
    (A0 skips the later extensions of a point when one raises)."""
    end()


def _open(agent: Any, source: Source) -> None:  # seams swallow and log: A0 does not catch
    try:
        memory_patch.ensure_installed()
        begin(agent, source)
    except Exception:
        log.exception("a0_reranker: could not open the %s scope", source)


def _install(seam: str) -> None:
    try:
        if installed():
            memory_patch.ensure_installed()
    except Exception:
        log.exception("a0_reranker: could not wrap the memory search at %s", seam)
