// The endpoint setting's checks, made as core/endpoint_url.py makes them (endpoints_problem), so the
// panel refuses exactly what the plugin refuses on Save, in the same words: the same splitting of a
// list (commas or whitespace, Python's whitespace, but none inside a URL's user:password@: a password
// typed raw may hold them), the bad entry named by position, never by its text (it may hold a
// password), and each URL read by urllib.parse.urlsplit's rules rather than the browser's stricter URL
// parser. A test runs both over the same inputs and compares the messages.

const WHITESPACE = "\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const SEPARATORS = new RegExp(`[,${WHITESPACE}]+`, "gu");
const EDGES = new RegExp(`^[${WHITESPACE}]+|[${WHITESPACE}]+$`, "gu");
const NOT_IN_URLS = new RegExp(`[${WHITESPACE}\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff]`, "u");
// core/redaction.py's _USERINFO: a URL's user:password@, within one word, or across words after "//"
const NO_PORT = `:(?![0-9]*(?:[/?#,${WHITESPACE}]|$))`;
const USERINFO = new RegExp(
  `(?:^|(?<=//)|(?<=[${WHITESPACE}]))(?:[^/${WHITESPACE}]*@|[^/?#${WHITESPACE}@:]*${NO_PORT}[^${WHITESPACE}@]*@)` +
    `|(?:^|(?<=//))[^/?#@:]*${NO_PORT}[^@]*@`,
  "gu",
);
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*$/;
const IPV_FUTURE = /^v[a-fA-F0-9]+\..+$/;
const MALFORMED_HOST =
  "has a malformed host: an IPv6 address goes in [brackets], an IPv4 address or a host name without them, " +
  "and a host name has only letters, digits, dots and hyphens";

/** The panel's message for an endpoint setting, or "" (empty is allowed: the plugin stays inert). */
export function endpointProblem(text) {
  const problem = endpointsProblem(text);
  if (!problem) return "";
  return problem.startsWith("entry ") ? `${capitalized(problem)}.` : `The URL ${problem}.`;
}

/** core's endpoints_problem: why the setting is unusable, naming the entry when it lists several. */
export function endpointsProblem(text) {
  const parts = entries(strip(text));
  if (parts.length <= 1) return urlProblem(parts[0] ?? ""); // a stray comma around one URL is no entry
  for (const [index, part] of parts.entries()) {
    const problem = urlProblem(part);
    if (problem) return `entry ${index + 1} of ${parts.length} ${problem}`;
  }
  return "";
}

/** core's endpoint_entries: cut at each run of separators, except one inside a user:password@. */
function entries(text) {
  const inside = [...text.matchAll(USERINFO)].map((m) => [m.index, m.index + m[0].length]);
  const found = [];
  let from = 0;
  for (const run of text.matchAll(SEPARATORS)) {
    if (inside.some(([first, last]) => first < run.index && run.index < last)) continue;
    found.push(text.slice(from, run.index));
    from = run.index + run[0].length;
  }
  found.push(text.slice(from));
  return found.filter(Boolean);
}

/** core's endpoint_problem, in the same order; "rerank_api_key" is the API key field here. */
function urlProblem(text) {
  const value = strip(text);
  if (!value) return "";
  // a password's spaces: refused below as a password
  if (NOT_IN_URLS.test(value.replace(USERINFO, "***@"))) {
    return "must not contain spaces, line breaks or other control characters";
  }
  const parts = splitUrl(value);
  if (parts === null) return MALFORMED_HOST;
  if (parts.scheme !== "http" && parts.scheme !== "https") return "must start with http:// or https://";
  const { user, password, hostname, port } = netlocParts(parts.netloc);
  if (!hostname) return "has no host name";
  if (user || password) return "must not contain a user name or password (put a key in API key)";
  // a path's @ reads as a token typed as a user name (https://TOKEN/WITH/SLASH@host)
  if (value.includes("@")) return "must not contain @ (a user name or password goes in no URL: put a key in API key)";
  // an empty one too (core checks the text): the plugin's paths would go after it
  if (parts.query || parts.fragment || /[?#]/.test(value)) return "must not contain ?query or #fragment";
  if (port && !(/^[0-9]+$/.test(port) && Number(port) <= 65535)) return "has an invalid port";
  return "";
}

/** urlsplit's reading of a URL without spaces or control characters (but in its user:password@); null where
 * it raises ValueError. */
function splitUrl(url) {
  let scheme = "";
  let rest = url;
  const colon = url.indexOf(":");
  if (colon > 0 && SCHEME.test(url.slice(0, colon))) {
    scheme = url.slice(0, colon).toLowerCase();
    rest = url.slice(colon + 1);
  }
  let netloc = "";
  if (rest.startsWith("//")) {
    const end = rest.slice(2).search(/[/?#]/);
    netloc = end < 0 ? rest.slice(2) : rest.slice(2, 2 + end);
    rest = end < 0 ? "" : rest.slice(2 + end);
    if (netloc.includes("[") !== netloc.includes("]")) return null;
    if (netloc.includes("[") && !bracketedHostOk(after(netloc, "[").split("]")[0])) return null;
  }
  const [beforeFragment, fragment = ""] = splitOnce(rest, "#");
  const [, query = ""] = splitOnce(beforeFragment, "?");
  return netlocSurvivesNfkc(netloc) ? { scheme, netloc, query, fragment } : null;
}

/** An IPv6 address (a zone allowed) or an IPvFuture one, as urlsplit's _check_bracketed_host. */
function bracketedHostOk(host) {
  if (host.startsWith("v")) return IPV_FUTURE.test(host);
  const [address, zone] = splitOnce(host, "%");
  if (zone !== undefined && (!zone || zone.includes("%"))) return false;
  if (!address.includes(":")) return false; // an IPv4 address, or none: not in brackets
  try {
    return new URL(`http://[${address}]/`).hostname !== "";
  } catch {
    return false;
  }
}

/** urlsplit's _checknetloc: no character that NFKC turns into one of / ? # @ : (like U+2100, "a/c"). */
function netlocSurvivesNfkc(netloc) {
  if (!netloc || /^[\x00-\x7f]*$/.test(netloc)) return true;
  const text = netloc.replace(/[@:#?]/g, "");
  const normalized = text.normalize("NFKC");
  return text === normalized || ![..."/?#@:"].some((c) => normalized.includes(c));
}

/** SplitResult's username, password, hostname and port strings ("" when absent). */
function netlocParts(netloc) {
  const at = netloc.lastIndexOf("@");
  const [user, password = ""] = at < 0 ? [""] : splitOnce(netloc.slice(0, at), ":");
  const hostinfo = netloc.slice(at + 1);
  if (hostinfo.includes("[")) {
    const [hostname, tail = ""] = splitOnce(after(hostinfo, "["), "]");
    return { user, password, hostname, port: after(tail, ":") };
  }
  const [hostname, port = ""] = splitOnce(hostinfo, ":");
  return { user, password, hostname, port };
}

function splitOnce(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? [text] : [text.slice(0, at), text.slice(at + separator.length)];
}

function after(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? "" : text.slice(at + separator.length);
}

function strip(text) {
  return text.replace(EDGES, "");
}

function capitalized(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
