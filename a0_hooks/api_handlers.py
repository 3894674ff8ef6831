"""What the settings panel asks the server, for the modal's scope (a project and an agent profile): Test connection
and live status. Each answers, never raises, never returns the API key; state: none. Test probes the form's unsaved
settings over the defaults live, never from the detection cache, so a URL just fixed tests right at once."""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from ..core import recall_budget
from ..core.config import RerankerConfig
from ..core.errors import ConfigError
from ..core.probe_report import NOT_SAVED
from ..service import runtime
from . import status as plugin_status
from .recall_entry import default_settings, from_a0

log = logging.getLogger("a0_reranker")
_SCOPE_NAME: Final = re.compile(r"^(?!\.{1,2}$)[^/\\\x00]{0,255}$")  # one folder name (or "" for all): no path


async def test_connection(payload: Any) -> dict[str, Any]:
    """``ProbeReport.as_dict()`` plus ``success`` and ``warnings``: settings that work against A0, counted
    with the LLM steps A0's ``_memory`` settings turn on in the modal's scope."""
    posted = payload.get("config") if isinstance(payload, Mapping) else None
    if not isinstance(posted, Mapping):
        return _failure('Send the settings to test as {"config": {...}}.', "")
    key = str(posted.get("rerank_api_key") or "")
    try:
        config, errors = _validated({**default_settings(), **posted})
        if config is None:
            return _failure(f"Fix these settings first: {', '.join(errors)}.", key, errors=errors)
        if not config.configured:
            return _failure("Set the Reranker endpoint first (the server's base URL, e.g. http://HOST:8002).", key)
        report = await runtime.probe_async(config)
        try:
            steps = plugin_status.recall_steps(**_lookup(_scope(payload)))
        except ValueError:  # a scope that is not one: the global one's steps
            steps = plugin_status.recall_steps()
        reply = {**report.as_dict(), "success": report.ok, "warnings": recall_budget.warnings(config, steps)}
        return plugin_status.scrub(reply, key)
    except Exception as exc:
        log.exception("a0_reranker: Test connection failed unexpectedly")
        return _failure(f"Unexpected error while testing: {type(exc).__name__}.", key)


def _validated(settings: Mapping[str, Any]) -> tuple[RerankerConfig | None, dict[str, str]]:
    """The config, or None and one message per bad key: unreadable values are dropped and the rest checked
    again, so one click lists them all."""
    errors: dict[str, str] = {}
    remaining = dict(settings)
    for _ in range(2):
        try:
            config = RerankerConfig.from_settings(remaining)
            return (config, {}) if not errors else (None, errors)
        except ConfigError as exc:
            for problem in exc.problems:
                name, _, message = problem.partition(": ")
                errors[name] = f"{errors[name]}; {message}" if name in errors else message
                remaining.pop(name, None)
    return None, errors


def _failure(message: str, key: str, *, errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"ok": False, "success": False, "message": message, "note": NOT_SAVED}
    if errors:
        reply["errors"] = dict(errors)
    return plugin_status.scrub(reply, key)


def status(payload: Any = None) -> dict[str, Any]:
    """The status snapshot for the modal's scope (``{"project_name", "agent_profile"}``; empty: global)."""
    try:
        scope = _scope(payload)
    except ValueError as exc:
        return {"success": False, "message": f"Unknown scope: {exc}."}
    try:
        labels = {label: _label(scope[name], *lister) for name, (label, *lister) in _LABELS.items()}
        return {"success": True, "scope": {**scope, **labels}, **plugin_status.snapshot(None, scope=_lookup(scope))}
    except Exception as exc:
        log.exception("a0_reranker: status failed unexpectedly")
        return {"success": False, "message": f"Unexpected error: {type(exc).__name__}."}


def _scope(payload: Any) -> dict[str, str]:
    """The modal's project and agent profile (``""``: A0's "Global", "All profiles"); ValueError for names
    that are not plain folder names."""
    names = payload if isinstance(payload, Mapping) else {}
    scope = {key: names.get(key) or "" for key in ("project_name", "agent_profile")}
    for field, name in scope.items():  # the name is not echoed back: it may be anything, of any length
        if not isinstance(name, str) or not _SCOPE_NAME.match(name):
            raise ValueError(f"{field} is not a project or agent profile name")
    return scope


def _lookup(scope: dict[str, str]) -> dict[str, str]:
    """The keywords of A0's ``get_plugin_config`` for this scope: none for the global one."""
    return scope if any(scope.values()) else {}


# the scope's names as A0's modal shows them: a project's title, a profile's label (A0's lister, its fields)
_LABELS: Final = {"project_name": ("project_label", "projects", "get_active_projects_list", "name", "title"),
                  "agent_profile": ("agent_profile_label", "subagents", "get_all_agents_list", "key", "label")}


def _label(name: str, module: str, lister: str, key: str, field: str) -> str:
    def listed(_plugins: Any) -> str:
        entries = getattr(importlib.import_module(f"helpers.{module}"), lister)()
        return {str(e.get(key)): str(e.get(field) or "") for e in entries}.get(name) or name
    return from_a0(name, "the scope's labels", listed) if name else ""  # outside A0 or on error: the name
