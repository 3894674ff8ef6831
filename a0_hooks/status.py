"""What the plugin reports about itself (state: none): the panel's live status and the ``reranker_status``
tool's text with a live probe, for the agent's scope or a named one. Never the API key (only whether one is
set; every text is scrubbed of it) nor a password typed into the endpoint."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Final

from ..core import recall_budget
from ..core.config import RerankerConfig, to_endpoints
from ..core.endpoint_url import shown_endpoints
from ..core.errors import ConfigError
from ..core.probe_report import ProbeReport
from ..core.recall_budget import NO_LLM_STEPS, RecallSteps
from ..core.redaction import redact
from ..core.statistics import PoolStatistics
from ..service import runtime
from . import PLUGIN_NAME, memory_patch, recall_entry
from .recall_entry import from_a0

log = logging.getLogger("a0_reranker")
Read = tuple[dict[str, Any], RerankerConfig | None, list[str]]  # the raw settings, the config or the problems
MEMORY_PLUGIN: Final = "_memory"


def snapshot(agent: Any = None, read: Read | None = None, scope: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Settings of the agent's scope or the one ``scope`` names (``read`` when already read), whether the plugin is
    on there and wired in, and the process's counters with the servers of those settings (and any other while a
    request to it runs: one removed from the settings leaves the status). Never raises."""
    scope = scope or {}
    raw, config, problems = read or _settings(agent, **scope)
    steps = recall_steps(agent, **scope)
    key = str(raw.get("rerank_api_key") or "")
    try:
        shown = (config.endpoints, config.key_fingerprint) if config else ((), None)  # this scope's servers and key
        counters = runtime.statistics(*shown)
        statistics, pool = worded(counters.as_dict()), counters.pool
    except Exception:
        log.exception("a0_reranker: could not read the counters")
        statistics, pool = {}, PoolStatistics()
    info: dict[str, Any] = {
        "plugin_enabled": enabled_in(**scope) if agent is None and scope else recall_entry.enabled_for(agent),
        "memory_wrapper_installed": memory_patch.is_installed(),
        "configured": bool(config and config.configured),
        "rerank_enabled": bool(config and config.enabled),
        "mode": _mode(config, problems),
        "endpoint": config.endpoint if config else _shown_endpoint(raw),
        "api_setting": config.api if config else "",
        "model": config.model if config else "",
        "api_key_set": bool(key.strip()),  # trimmed as every text setting is: a blank key sends no header
        "candidates": config.candidates if config else None,
        "timeout_s": config.timeout if config else None,
        "settings_problems": problems,
        "settings_warnings": recall_budget.warnings(config, steps) if config else [],
        # only where recalls wait for the reranker: off or without an endpoint, none applies
        "recall_budget": (recall_budget.budget_line(config, steps)
                          if config and config.enabled and config.configured else ""),
        "statistics": statistics,
        "hints": [*overload_hints(statistics.get("load") or {}, config),
                  *pool_hints(pool, config)],
    }
    return scrub(info, key)


def _shown_endpoint(raw: Mapping[str, Any]) -> str:
    """Invalid settings' endpoint as typed, less every password: the tool's text reaches the LLM's logs."""
    try:
        return shown_endpoints(to_endpoints(raw.get("rerank_endpoint") or ""))
    except ValueError:  # not text at all: settings_problems says so
        return ""


STARVED_MIN_RECALLS = 5  # judge the pools only once a few recalls were seen
STARVED_FRACTION = 0.5


def pool_hints(pool: PoolStatistics, config: RerankerConfig | None) -> list[str]:
    """What to change when most pools left the reranker nothing to choose (empty: nothing to say). Judged on the
    counters as counted: the shown figures are rounded, and 49.6% is not half."""
    recalls, starved = pool.recalls, pool.starved_fraction or 0.0
    if recalls < STARVED_MIN_RECALLS or starved < STARVED_FRACTION:
        return []
    return [
        f"Pools are starved: in {starved:.0%} of {recalls} recalls the pool held no more memories than the recall "
        f"returns, so the reranker could only reorder them. Lower rerank_pool_threshold"
        f"{_now(config, 'pool_threshold')} or raise rerank_candidates{_now(config, 'candidates')}. Recall filters "
        "by area, and the store then looks at only its 20 nearest memories of all areas, so a small memory or one "
        "taken up by another area starves pools too."
    ]


def overload_hints(load: Mapping[str, Any], config: RerankerConfig | None) -> list[str]:
    """That the server is overloaded, by how much, and what helps (empty: nothing shed last minute)."""
    shed, goodput, offered = (load.get(key) or 0.0 for key in ("shed_per_s", "goodput_per_s", "offered_per_s"))
    if not shed:
        return []
    ratio = f"{offered / goodput:.1f}x what it reranks" if goodput else "more than it answers in time"
    return [
        f"The reranker is overloaded: over the last minute agents asked for {offered:.1f} recalls/s, {ratio} "
        f"({goodput:.1f}/s); {shed:.1f}/s got the stock order at once (shed) rather than wait past their "
        f"timeout. What helps: another replica of the model (list it in rerank_endpoint), a longer rerank_timeout"
        f"{_now(config, 'timeout', ' s')} to queue more, fewer rerank_candidates{_now(config, 'candidates')} so "
        "each recall costs less, or a faster model or GPU."
    ]


def _now(config: RerankerConfig | None, field: str, unit: str = "") -> str:
    return f" (now {getattr(config, field):g}{unit})" if config else ""


def enabled_in(project_name: str, agent_profile: str) -> bool:
    """The toggle of a named scope as A0's modal reads it: the first ``.toggle-*`` from that scope up (none:
    on). False outside A0 or on error."""
    def toggled_on(plugins: Any) -> bool:
        found = plugins.find_plugin_assets(plugins.TOGGLE_FILE_PATTERN, plugin_name=PLUGIN_NAME,
                                           project_name=project_name, agent_profile=agent_profile, only_first=True)
        return not found or not str(found[0].get("path", "")).endswith(".toggle-0")
    return from_a0(False, "the toggle of a scope", toggled_on)


def recall_steps(agent: Any = None, **scope: str) -> RecallSteps:
    """Which of A0's LLM recall steps (they spend part of the recall's time limit) the ``_memory`` settings
    of the agent's or the named scope turn on; none outside A0 or on error."""
    found = from_a0(None, "the _memory settings",
                    lambda plugins: plugins.get_plugin_config(MEMORY_PLUGIN, agent, **scope))
    if not isinstance(found, Mapping):
        return NO_LLM_STEPS
    return RecallSteps(query_prep=found.get("memory_recall_query_prep") is True,
                       post_filter=found.get("memory_recall_post_filter") is True)


def _settings(agent: Any, **scope: str) -> Read:
    try:
        raw = recall_entry.plugin_settings(agent, **scope)
    except Exception as exc:
        return {}, None, [f"settings could not be read: {type(exc).__name__}"]
    try:
        return raw, RerankerConfig.from_settings(raw), []
    except ConfigError as exc:
        return raw, None, list(exc.problems)


def _mode(config: RerankerConfig | None, problems: list[str]) -> str:
    if config is None:
        return "invalid settings" if problems else "unknown"
    if not config.enabled:
        return "off"
    if not config.configured:
        return "not configured"
    return "live" if config.apply else "shadow"


async def report(agent: Any = None) -> str:
    """The ``reranker_status`` tool's answer: settings, a live probe and the counters, in plain text."""
    read = raw, config, _ = _settings(agent)  # read once: for the summary and the live probe
    info = await asyncio.to_thread(snapshot, agent, read)  # it may wait on the owner loop: not on A0's, every chat's
    probe = await runtime.probe_async(config) if config is not None and config.configured else None
    return redact(format_report(info, probe), str(raw.get("rerank_api_key") or ""))


def format_report(info: Mapping[str, Any], probe: ProbeReport | None) -> str:
    disabled = "" if info["plugin_enabled"] else "plugin disabled here; "
    key_state = "set" if info["api_key_set"] else "not set"
    lines = ["Reranker status (a0_reranker)", f"- Mode: {disabled}{_MODE_TEXTS.get(info['mode'], info['mode'])}",
             f"- Endpoint: {info['endpoint'] or '(not set)'}; API setting: {info['api_setting'] or '-'}; "
             f"model: {info['model'] or '(server default)'}; API key: {key_state}"]
    lines += [f"- Invalid setting: {problem}" for problem in info["settings_problems"]]
    lines += [f"- Setting warning: {warning}" for warning in info.get("settings_warnings") or []]
    if info.get("recall_budget"):
        lines.append(f"- Recall budget: {info['recall_budget']}")
    if probe is not None:
        lines.append(f"- Live test: {probe.message}")
        lines.extend(f"- Replica {i} {r.endpoint}: {r.message}" for i, r in enumerate(probe.replicas, 1))
        if probe.ok and not probe.replicas:
            lines.append(f"- Resolved API: {probe.api} at {probe.path} (server {probe.server}, "
                         f"model {probe.model or 'default'})")
    lines.append(f"- Memory search wrapped: {'yes' if info['memory_wrapper_installed'] else 'no (not yet)'}")
    lines.extend(_counter_lines(info.get("statistics") or {}))
    lines.extend(f"- Hint: {hint}" for hint in info.get("hints") or [])
    return "\n".join(lines)


_MODE_TEXTS: Final = {
    "live": "live: recalled memories are reranked",
    "shadow": "shadow: the reranker scores each recall, but the stock order is returned",
    "off": "off (rerank_enabled is false): recall is stock",
    "not configured": "inert: no endpoint is set (Settings > Agent > Reranker)",
    "invalid settings": "inert: the settings are invalid",
}


# the settings are the asking agent's, the counters its whole process's: an agent read others' fallbacks as its own
COUNTERS_SCOPE: Final = ("- Counters below: every agent's recalls in this Agent Zero process, not only this "
                         "agent's; the mode, endpoint and live test above are this agent's settings, and the "
                         "servers listed are those of these settings (another only while a request to it runs)")


def _counter_lines(stats: Mapping[str, Any]) -> list[str]:
    if not stats:
        return []
    fallbacks = ", ".join(f"{reason} {count}" for reason, count in sorted(stats["fallbacks"].items())) or "none"
    window = stats["latency_window"]
    lines = [
        COUNTERS_SCOPE,
        f"- Reranks: {stats['reranked']} of {stats['reranks']} succeeded; fallbacks: {fallbacks}",
        f"- Latency p50/p95{_recent_percentiles(stats['latency_p50_ms'], stats['latency_p95_ms'], window)}; HTTP "
        f"requests {stats['http_requests']} ({stats['mean_pairs_per_request'] or 0} pairs each on average); API "
        f"detections {stats.get('detections', 0)}",
    ]
    load = stats.get("load") or {}
    if load.get("offered_per_s"):
        lines.append(f"- Last minute: {load['offered_per_s']:g} recalls/s asked for, {load['goodput_per_s']:g}/s "
                     f"reranked, {load['shed_per_s']:g}/s shed; queue wait p50/p95"
                     f"{_recent_percentiles(load['queue_wait_p50_ms'], load['queue_wait_p95_ms'], window)}")
    if any(stats.get(key) for key in _RETRY_COUNTERS):
        counted = ", ".join(f"{label} {stats.get(key, 0)}" for key, label in _RETRY_COUNTERS.items())
        lines.append(f"- Sent again: {counted}")
    pool = stats.get("pool") or {}
    if pool.get("recalls"):
        lines.append(f"- Pool: {pool['recalls']} recalls, {pool['mean_size']} memories on average, "
                     f"{(pool['starved_fraction'] or 0.0):.0%} with nothing to choose; {pool['rescued']} rescued "
                     f"from outside the stock result; {pool['floor_dropped']} dropped by rerank_min_score")
    if stats["shadow_recalls"]:
        kept = stats["shadow_mean_kept_fraction"] or 0.0
        lines.append(f"- Shadow mode: recalls compared {stats['shadow_recalls']}; {kept:.0%} of the stock top kept "
                     f"on average, mean shift {stats['shadow_mean_displacement']}")
    lines.extend(server_line(replica, window) for replica in stats.get("replicas") or ())  # one per server, its breaker
    if stats["last_api"] or stats["last_error"]:
        error = f" ({stats['last_error_age']}): {stats['last_error']}" if stats["last_error"] else ": -"
        lines.append(f"- Last API used: {stats['last_api'] or '-'}; last error{error}")
    return lines


_RETRY_COUNTERS: Final = {
    "retries": "retries after an error or a 429", "reranked_after_retry": "recalls saved by a retry",
    "stale_connection_retries": "stale connections resent", "rate_limit_waits": "Retry-After waits", "hedges": "hedges",
    "retry_budget_exhausted": "retry budget spent", "cancelled": "reranks cancelled by their caller",
}


# a server's breaker state, as the balancer acts on it
SERVER_STATES: dict[str, str] = {"closed": "in rotation", "open": "ejected", "half_open": "probing back"}


def server_line(replica: Mapping[str, Any], window: str) -> str:
    """One replica: its state and breaker, share of the pairs, latency over ``window`` and what it has in flight."""
    breaker, latency = str(replica["breaker"]), f"no answer in the {window}"
    if replica["latency_ms"] is not None:
        per_pair = "" if replica["ms_per_pair"] is None else f", {replica['ms_per_pair']:g} ms per pair"
        latency = f"{replica['latency_ms']:g} ms per request{per_pair}"
    return (f"- Server {replica['url']}: {SERVER_STATES.get(breaker, breaker)} (breaker {breaker.replace('_', '-')}); "
            f"{replica['share']:.0%} of pairs ({replica['pairs']:,}); {latency}; {replica['in_flight']} in flight")


def _recent_percentiles(p50: float | None, p95: float | None, window: str) -> str:
    """Percentiles over the recent window, or that it had none: never a figure from before a quiet spell."""
    return f": no rerank in the {window}" if p50 is None else f" ({window}): {_ms(p50)} / {_ms(p95)}"


def worded(statistics: dict[str, Any]) -> dict[str, Any]:
    """The counters' JSON with what the tool and the panel say of them, worded here once so the two cannot
    drift: the last error's age (``last_error_age``, "3 min ago") and the latency window ("last 5 minutes")."""
    if not statistics:
        return statistics
    minutes = statistics["latency_window_s"] / 60
    return {**statistics, "latency_window": f"last {minutes:g} minute{'' if minutes == 1 else 's'}",
            "last_error_age": ago(statistics["last_error_age_s"]) if statistics["last_error"] else ""}


def ago(seconds: float | None) -> str:
    """An event's age in words ("3 min ago"): a user reads an undated error as the current problem."""
    if seconds is None:
        return "when unknown"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g} ms"


def scrub(value: Any, *secrets: str) -> Any:
    """``value`` with every string (nested in dicts and lists too) redacted of ``secrets``."""
    if isinstance(value, str):
        return redact(value, *secrets)
    if isinstance(value, Mapping):
        return {scrub(k, *secrets): scrub(v, *secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item, *secrets) for item in value]
    return value
