"""Which settings a recall uses, and which memory searches are a recall (state: the recall scope).

Settings: A0's ``get_plugin_config(name, agent)`` returns the first ``config.json`` found along the
project, agent-profile and global scopes (``per_project_config``, ``per_agent_config`` in plugin.yaml),
or the defaults when there is none, and never merges: a file saved by an older version lacks newer
keys, so we merge it over ``default_config.yaml``. A recall reads its own agent's settings, so a
sub-agent whose profile has its own ``config.json`` uses that one (another reranker, or
``rerank_enabled: false`` for none); without an agent, a ``Scope`` names a project and an agent profile
as A0's settings modal selects them. Outside A0 (the standalone package, the CLI) the plugin folder's
own ``config.json`` is read if present. A0 calls no hook on disable, so ``enabled_for`` asks at the time
of use (A0 caches the toggle files until a plugin change: cheap per recall).

The recall scope: our ``message_loop_prompts_after`` extensions set it just before A0's
``_50_recall_memories`` and clear it just after; the search task ``_50`` starts in between keeps a copy
(ContextVars are copied into ``create_task``). Deletion, consolidation, the dashboard and memorize never
see it, so the memory wrapper passes those straight through. Its ContextVar lives in the process-wide
anchor (``process.singletons``): A0 purges ``usr.plugins.*`` modules at runtime, and the wrapper
installed before a purge must read the variable our freshly imported extensions write after it. A0
does not catch exceptions raised by extensions, so every seam swallows and logs its own errors.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..core.config import DEFAULT_CONFIG_FILE, RerankerConfig, config_from_settings, load_default_settings
from ..core.errors import ConfigError
from ..core.recall_budget import NO_LLM_STEPS, RecallSteps
from ..process.singletons import PerProcess
from . import PLUGIN_NAME, memory_patch

log = logging.getLogger("a0_reranker")
PLUGIN_DIR = DEFAULT_CONFIG_FILE.parent
MEMORY_PLUGIN: Final = "_memory"


def a0_plugins() -> Any | None:
    """A0's ``helpers.plugins`` module, or None outside Agent Zero (the standalone package, the CLI)."""
    try:
        plugins = importlib.import_module("helpers.plugins")
    except Exception:
        return None
    return plugins if callable(getattr(plugins, "get_plugin_config", None)) else None


def enabled_for(agent: Any) -> bool:
    """The plugin is installed and switched on in this agent's scope (False outside A0 or on error)."""
    plugins = a0_plugins()
    if plugins is None:
        return False
    try:
        return PLUGIN_NAME in plugins.get_enabled_plugins(agent)
    except Exception:
        log.debug("a0_reranker: could not read the enabled plugins", exc_info=True)
        return False


def enabled_in(project_name: str, agent_profile: str) -> bool:
    """The toggle of a named scope as A0's settings modal reads it: the first ``.toggle-1``/``.toggle-0``
    found from that scope up to the global one (none: on). False outside A0 or on error."""
    plugins = a0_plugins()
    if plugins is None:
        return False
    try:
        found = plugins.find_plugin_assets(plugins.TOGGLE_FILE_PATTERN, plugin_name=PLUGIN_NAME,
                                           project_name=project_name, agent_profile=agent_profile, only_first=True)
    except Exception:
        log.debug("a0_reranker: could not read the toggle of a scope", exc_info=True)
        return False
    return not found or not str(found[0].get("path", "")).endswith(".toggle-0")


def installed() -> bool:
    """The plugin folder is still there (a manual ``rm -rf`` calls no hook)."""
    plugins = a0_plugins()
    try:
        return plugins is not None and plugins.find_plugin_dir(PLUGIN_NAME) is not None
    except Exception:
        return False


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
    """The scope's names as A0's modal shows them: a project's title and an agent profile's label (the
    lists behind its selectors), or the names themselves; ``""`` for Global and All profiles."""
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
    plugins = a0_plugins()
    try:
        found = _config_of(plugins, MEMORY_PLUGIN, agent, scope) if plugins is not None else None
    except Exception:
        log.debug("a0_reranker: could not read the _memory settings", exc_info=True)
        return NO_LLM_STEPS
    if not isinstance(found, Mapping):
        return NO_LLM_STEPS
    return RecallSteps(query_prep=found.get("memory_recall_query_prep") is True,
                       post_filter=found.get("memory_recall_post_filter") is True)


def plugin_settings(agent: Any = None, scope: Scope | None = None) -> dict[str, Any]:
    """Defaults, then the saved settings of the agent's (or ``scope``'s) scope on top."""
    return {**load_default_settings(), **saved_settings(agent, scope)}


def resolve_config(config: RerankerConfig | Mapping[str, Any] | None = None, agent: Any = None) -> RerankerConfig:
    """The config a call uses: ``None`` = the plugin's settings; a dict overrides them; a config is used as is.

    Raises ``ConfigError`` naming every bad key (or ``config`` itself when it is neither).
    """
    if isinstance(config, RerankerConfig):
        return config
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError([f"config: expected a dict of rerank_* settings or a RerankerConfig, "
                           f"got {type(config).__name__}"])
    settings = plugin_settings(agent)
    if config:
        settings.update(config)
    return config_from_settings(settings)


def _read_json() -> dict[str, Any]:
    path = PLUGIN_DIR / "config.json"
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
    """A search in this context is a recall of ``agent`` (read by attribute only: the class itself
    is re-created by every module purge)."""

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
    _RECALL.get().set(None)


@contextmanager
def suspended() -> Iterator[None]:
    """No scope inside the block: the pool fetch must not be reranked by a nested wrapper."""
    var = _RECALL.get()
    token = var.set(None)
    try:
        yield
    finally:
        var.reset(token)


def on_startup() -> None:
    """``startup_migration``: wrap the memory search before the first chat starts."""
    _install("startup")


def on_agent_init(agent: Any) -> None:
    """``agent_init`` (every new agent, subordinates included): make sure the wrapper is in place."""
    _install("agent_init")


def before_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_49``: re-check the wrapper (cheap), then open the recall scope."""
    _open(agent, "recall")


def after_recall(agent: Any) -> None:
    """``message_loop_prompts_after/_51``: close the scope in the loop's own context, so memorize and
    consolidation started later at ``monologue_end`` do not inherit it (the recall task kept its copy)."""
    _close()


def before_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_before``: the ``memory_load`` tool's search is a recall too."""
    if tool_name == MEMORY_LOAD_TOOL:
        _open(agent, "memory_load")


def after_tool(agent: Any, tool_name: str | None) -> None:
    """``tool_execute_after``: close the ``memory_load`` scope."""
    if tool_name == MEMORY_LOAD_TOOL:
        _close()


def on_monologue_end(agent: Any) -> None:
    """``monologue_end``, before memorize starts its background task: clear a scope that a failed
    recall or tool left open (A0 skips the later extensions of a point when one raises)."""
    _close()


def _open(agent: Any, source: Source) -> None:
    try:
        memory_patch.ensure_installed()
        begin(agent, source)
    except Exception:
        log.exception("a0_reranker: could not open the %s scope", source)


def _close() -> None:
    try:
        end()
    except Exception:
        log.exception("a0_reranker: could not close the recall scope")


def _install(seam: str) -> None:
    try:
        if installed():
            memory_patch.ensure_installed()
    except Exception:
        log.exception("a0_reranker: could not wrap the memory search at %s", seam)
