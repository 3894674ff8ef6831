// The settings panel's plain logic, no Alpine: where the limits and fields come from, and the checks
// run before anything is sent.
//
// The limits and the fields come from settings-schema.json, whose types, limits and choices a test
// keeps equal to core/config.py (the settings' one source). The values come from Agent Zero's modal,
// complete: the plugin fills the keys an older config.json lacks when A0 loads it.

import { endpointProblem } from "/plugins/a0_reranker/webui/reranker-endpoint.js";

export const PLUGIN_NAME = "a0_reranker";
// core/redaction.py's UNPRINTABLE: what a single-line setting must not hold
const UNPRINTABLE = /[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]/u;
export const SCHEMA_URL = `/plugins/${PLUGIN_NAME}/webui/settings-schema.json`;

/** `{sections: [{key, title, description}], settings: {key: {type, min, max, choices, section, ...}}}`. */
export async function loadSchema(fetchFn = fetch) {
  const response = await fetchFn(SCHEMA_URL, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`settings-schema.json: HTTP ${response.status}`);
  const schema = await response.json();
  if (!isPlainObject(schema?.settings)) throw new Error("settings-schema.json has no settings");
  if (!Array.isArray(schema.sections)) throw new Error("settings-schema.json has no sections");
  return schema;
}

/**
 * What config.html draws: each section in the schema's order (``folded``: drawn closed, for the
 * settings a newcomer need not touch) with its settings in the schema's order, and per setting the
 * control's kind (toggle, select, text, password, number, textarea), its words, and what that
 * control needs (placeholder; step from the type; a select's options with their labels; a textarea
 * spans the panel's width).
 */
export function panelSections(schema) {
  const entries = Object.entries(schema.settings);
  return schema.sections.map(({ key, title, description = "", folded = false }) => ({
    key,
    title,
    description,
    folded: Boolean(folded),
    fields: entries.filter(([, entry]) => entry.section === key).map(([name, entry]) => fieldView(name, entry)),
  }));
}

function fieldView(key, entry) {
  return {
    key,
    title: entry.title,
    description: entry.description,
    control: entry.control,
    placeholder: entry.placeholder ?? null,
    wide: entry.control === "textarea",
    step: entry.type === "integer" ? "1" : "any",
    options: (entry.choices ?? []).map((value) => ({ value, label: entry.labels?.[value] ?? value })),
  };
}

/** A plain copy of the form's values (no Alpine proxies), as JSON would send them. */
export function plainCopy(config) {
  return JSON.parse(JSON.stringify(config ?? {}));
}

/**
 * One message per bad value: `{rerank_timeout: "Enter a number from 0.05 to 600."}`.
 * With `requireEndpoint` an empty endpoint is a problem too (Test needs a server; Save does not).
 */
export function settingProblems(config, schema, { requireEndpoint = false } = {}) {
  const problems = {};
  for (const [key, rule] of Object.entries(schema.settings)) {
    const problem = valueProblem(config?.[key], rule);
    if (problem) problems[key] = problem;
  }
  if (requireEndpoint && !problems.rerank_endpoint && !String(config?.rerank_endpoint ?? "").trim()) {
    problems.rerank_endpoint = "Enter your reranker server's base URL to test it, e.g. http://HOST:8002.";
  }
  return problems;
}

/** Why `value` breaks `rule`, or "" (a missing value is left to the plugin's defaults). */
export function valueProblem(value, rule) {
  if (value === undefined || value === null) return "";
  switch (rule.type) {
    case "bool":
      return typeof value === "boolean" ? "" : "Must be on or off.";
    case "choice":
      return rule.choices.includes(value) ? "" : `Choose one of: ${rule.choices.join(", ")}.`;
    case "url":
      return typeof value === "string" ? endpointProblem(value) : "Enter the URL as text.";
    case "line": // core's single-line fields: a header value and a file name
      if (typeof value !== "string") return "Must be text.";
      return UNPRINTABLE.test(value) ? "Must not contain a line break or other control character." : "";
    case "integer":
    case "number":
      return numberProblem(value, rule);
    default:
      return typeof value === "string" ? "" : "Must be text.";
  }
}

/** Whole numbers for integer settings, any finite number otherwise, inside the inclusive range. */
export function numberProblem(value, rule) {
  const wanted = rule.type === "integer" ? "a whole number" : "a number";
  const ask = `Enter ${wanted} from ${formatNumber(rule.min)} to ${formatNumber(rule.max)}.`;
  const number = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  if (typeof number !== "number" || !Number.isFinite(number)) return ask;
  if (rule.type === "integer" && !Number.isInteger(number)) return ask;
  return number < rule.min || number > rule.max ? ask : "";
}

export function formatNumber(value, digits = 6) {
  return typeof value === "number" && Number.isFinite(value)
    ? value.toLocaleString("en-US", { maximumFractionDigits: digits })
    : "–";
}

function isPlainObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
