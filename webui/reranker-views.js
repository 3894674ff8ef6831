// What the panel shows for the plugin's two API replies, in plain words. No Alpine, no I/O.
//   test_connection: ProbeReport.as_dict() + success, warnings (or {ok: false, message, errors});
//                    with several replicas a summary and `replicas`, one report each
//   status:          {success, mode, plugin_enabled, ..., settings_warnings, hints,
//                     statistics: RerankerStatistics.as_dict() (its pool counters under "pool", one
//                     entry per server under "replicas") with latency_window and last_error_age in words}

import { formatNumber } from "/plugins/a0_reranker/webui/reranker-settings.js";

const MODES = {
  live: ["Live", "recalled memories are reranked", "good"],
  shadow: ["Shadow", "the reranker scores each recall, the stock order is kept", "warn"],
  off: ["Off", "Enabled is off: recall is stock", "muted"],
  "not configured": ["Inert", "no endpoint is saved yet", "muted"],
  "invalid settings": ["Inert", "the saved settings are invalid", "bad"],
};

const BREAKER_STATES = {
  closed: ["closed", "healthy", "good"],
  open: ["open", "skipping the server", "bad"],
  half_open: ["half-open", "probing the server", "warn"],
};

// a server's breaker state, as the balancer acts on it (a0_hooks/status.py SERVER_STATES)
const SERVER_STATES = {
  closed: ["in rotation", "good"],
  open: ["ejected", "bad"],
  half_open: ["probing back", "warn"],
};

/** Rows for the inline Test result; `sent: false` when the panel refused to send the test. */
export function testView(reply, { sent = true } = {}) {
  const ok = reply?.ok === true;
  const replicas = (reply?.replicas ?? []).map(replicaRow);
  const problems = Object.entries(reply?.errors ?? {}).map(([key, text]) => `${key}: ${text}`);
  return {
    ok,
    tone: ok ? "good" : "bad",
    headline: replicas.length ? replicaHeadline(replicas) : headline(reply, ok, sent),
    message: reply?.message || (ok ? "" : "No answer from the test."),
    rows: replicas.length ? [] : testRows(reply),
    replicas,
    problems,
    attempts: ok ? [] : [...(reply?.attempts ?? [])],
    warnings: [...(reply?.warnings ?? [])],
    note: reply?.note || "",
  };
}

function headline(reply, ok, sent) {
  if (ok) return "Reranks correctly";
  if (!sent) return "Not tested";
  return reply?.api ? "Answers, but ranks wrongly" : "Not working";
}

function replicaHeadline(replicas) {
  const good = replicas.filter((row) => row.ok).length;
  if (good === replicas.length) return `All ${good} replicas rank correctly`;
  return good ? `${good} of ${replicas.length} replicas rank correctly` : "Not working";
}

/** One replica's line of a Test: what it speaks and how well, or why it failed. */
function replicaRow(report, index) {
  const verdict = report?.ok ? "ranks correctly" : report?.api ? "ranks wrongly" : "not working";
  return {
    position: index + 1,
    url: report?.endpoint || "",
    ok: report?.ok === true,
    tone: report?.ok ? "good" : "bad",
    verdict,
    api: report?.api || "–",
    path: report?.path || "–",
    server: report?.server || "–",
    latency: milliseconds(report?.latency_ms) || "–",
    margin: signed(report?.margin) || "–",
    error: report?.ok ? "" : report?.message || "",
  };
}

function testRows(reply) {
  return [
    ["Detected API", reply?.api],
    ["Server", reply?.server],
    ["Path", reply?.path],
    ["Latency", milliseconds(reply?.latency_ms)],
    ["Relevant score", score(reply?.relevant_score)],
    ["Irrelevant score", score(reply?.irrelevant_score)],
    ["Margin", signed(reply?.margin)],
    ["Model", reply?.api ? reply?.model || "server default" : ""],
    ["URL", reply?.url],
  ].filter(([, value]) => value);
}

/** Tiles and lists for the live status block. */
export function statusView(reply) {
  const stats = reply?.statistics ?? {};
  const [modeName, modeText, modeTone] = MODES[reply?.mode] ?? [reply?.mode || "Unknown", "", "muted"];
  const fallbacks = Object.entries(stats.fallbacks ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([reason, count]) => ({ reason: reason.replaceAll("_", " "), count }));
  const servers = (stats.replicas ?? []).map(serverRow);
  return {
    mode: reply?.plugin_enabled === false ? `${modeName} (plugin disabled here)` : modeName,
    modeText,
    modeTone: reply?.plugin_enabled === false ? "muted" : modeTone,
    ...rerankedView(stats),
    meanPairs: stats.mean_pairs_per_request == null ? "–" : formatNumber(stats.mean_pairs_per_request, 1),
    httpRequests: count(stats.http_requests),
    latency: `${milliseconds(stats.latency_p50_ms) || "–"} / ${milliseconds(stats.latency_p95_ms) || "–"}`,
    // the window and the error's age as the status words them (a0_hooks/status.py worded), for the tool's too
    latencyWindow: stats.latency_window || "recent window",
    breakers: breakerItems(stats.breakers ?? {}, servers),
    servers,
    retries: count((stats.retries ?? 0) + (stats.stale_connection_retries ?? 0)),
    retryNote: retryNote(stats),
    shadow: stats.shadow_recalls
      ? `${count(stats.shadow_recalls)} recalls compared; ${percent(stats.shadow_mean_kept_fraction)} of the stock ` +
        `top kept, mean shift ${formatNumber(stats.shadow_mean_displacement, 2)}`
      : "",
    lastError: stats.last_error || "",
    lastErrorAge: stats.last_error ? stats.last_error_age || "when unknown" : "", // an old error is no current one
    problems: [...(reply?.settings_problems ?? [])],
    // the project and agent profile whose settings the mode, problems and servers are (the counters: all of A0)
    scope: scopeView(reply?.scope ?? {}),
    ...fallbackView(stats, fallbacks),
    ...poolView(stats.pool ?? {}, stats.reranked ?? 0),
    ...loadView(stats.load ?? {}),
    warnings: [...(reply?.settings_warnings ?? [])],
    hints: [...(reply?.hints ?? [])],
  };
}

/** Reranked of asked: every rerank, memory recalls and calls through the API alike. */
function rerankedView(stats) {
  const asked = stats.reranks ?? 0;
  return {
    reranked: `${count(stats.reranked)} of ${count(asked)}`,
    rerankedNote: asked ? "succeeded of asked, recalls and API calls" : "nothing asked yet",
  };
}

/** The fallbacks tile says "every recall was reranked" only once a recall was. */
function fallbackView(stats, fallbacks) {
  const total = stats.fallback_total ?? 0;
  const note = !stats.reranks && !total ? "none: nothing asked yet" : "none: every rerank succeeded";
  return { fallbackTotal: count(total), fallbacks, fallbackNote: note };
}

/** Each endpoint's breaker, in the servers table's order (the replicas as listed), then any other. */
function breakerItems(breakers, servers) {
  const order = servers.map((row) => row.url);
  const rank = (endpoint) => (order.includes(endpoint) ? order.indexOf(endpoint) : order.length);
  return Object.entries(breakers)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([endpoint, state]) => {
      const [name, meaning, tone] = BREAKER_STATES[state] ?? [state, "", "muted"];
      return { endpoint, state: name, meaning, tone };
    });
}

/** The scope in Agent Zero's words: its project's and profile's titles, as the plugin's status sends them. */
function scopeView(scope) {
  const projectName = scope.project_name || "";
  const agentProfile = scope.agent_profile || "";
  const project = scope.project_label || projectName || "Global";
  const profile = scope.agent_profile_label || agentProfile || "All profiles";
  return { projectName, agentProfile, label: `${project}, ${profile}` };
}

/** One server the reranker sends to (a replica): state, breaker, share of pairs, recent latency, in flight. */
function serverRow(replica) {
  const [state, tone] = SERVER_STATES[replica?.breaker] ?? [replica?.breaker || "unknown", "muted"];
  return {
    url: replica?.url || "",
    state,
    tone,
    breaker: String(replica?.breaker ?? "").replaceAll("_", "-"),
    share: percent(replica?.share),
    pairs: count(replica?.pairs),
    latency: milliseconds(replica?.latency_ms) || "–",
    perPair: typeof replica?.ms_per_pair === "number" ? `${formatNumber(replica.ms_per_pair, 3)} ms` : "–",
    inFlight: count(replica?.in_flight),
  };
}

/** The load tile: the last minute's recalls asked for, reranked (goodput) and shed, and the queue wait. */
function loadView(load) {
  if (!load.offered_per_s) return { goodput: "–", loadNote: "no recall in the last minute" };
  const wait = `${milliseconds(load.queue_wait_p50_ms) || "–"} / ${milliseconds(load.queue_wait_p95_ms) || "–"}`;
  return {
    goodput: `${formatNumber(load.goodput_per_s, 1)} of ${formatNumber(load.offered_per_s, 1)} /s`,
    loadNote:
      (load.shed_per_s ? `${formatNumber(load.shed_per_s, 1)} /s shed: overloaded` : "none shed") +
      `; queue wait p50 / p95 ${wait}`,
  };
}

/** The pool tile: what the reranker had to choose from. Only memory recalls have a pool; a rerank
 *  asked through the API (another plugin, the command line) has none. */
function poolView(pool, reranked) {
  if (!pool.recalls) {
    const note = reranked
      ? `no memory recall yet: the ${count(reranked)} reranked came through the API, which has no pool`
      : "no recall reranked yet";
    return { poolSize: "–", poolNote: note };
  }
  return {
    poolSize: formatNumber(pool.mean_size, 1),
    poolNote:
      `over ${count(pool.recalls)} recalls; ${percent(pool.starved_fraction)} had nothing to choose; ` +
      `${count(pool.rescued)} rescued, ${count(pool.floor_dropped)} dropped by the floor`,
  };
}

function retryNote(stats) {
  const parts = [
    [stats.reranked_after_retry, "recalls saved by a retry"],
    [stats.stale_connection_retries, "stale connections resent"],
    [stats.rate_limit_waits, "Retry-After waits"],
    [stats.hedges, "hedges"],
    [stats.retry_budget_exhausted, "times the retry budget was spent"],
    [stats.cancelled, "cancelled by their caller"],
  ].filter(([value]) => typeof value === "number" && value > 0);
  return parts.length ? parts.map(([value, text]) => `${text}: ${count(value)}`).join(", ") : "none needed";
}

function count(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : "0";
}

function milliseconds(value) {
  if (typeof value !== "number") return "";
  return `${formatNumber(value, value < 10 ? 1 : 0)} ms`;
}

function score(value) {
  return typeof value === "number" && Number.isFinite(value) ? String(Number(value.toPrecision(3))) : "";
}

function signed(value) {
  const text = score(value);
  return text && value >= 0 ? `+${text}` : text;
}

function percent(value) {
  return typeof value === "number" ? `${Math.round(value * 100)}%` : "–";
}
