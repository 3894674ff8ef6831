// Host stand-in for A0's /js/api.js: the same URL rule ("/plugins/x/y" -> "/api/plugins/x/y"), the
// CSRF token fetched once from /api/csrf_token and sent as X-CSRF-Token, JSON in and out, and a
// thrown Error carrying the body of a non-2xx answer.

let csrfToken = null;

async function getCsrfToken() {
  if (!csrfToken) {
    const response = await fetch("/api/csrf_token", { credentials: "same-origin" });
    const reply = await response.json();
    if (!reply.ok) throw new Error(reply.error || "no CSRF token");
    csrfToken = reply.token;
  }
  return csrfToken;
}

function apiUrl(url) {
  const path = url.replace(/^\/+/, "");
  return path.startsWith("api/") ? `/${path}` : `/api/${path}`;
}

export async function fetchApi(url, request = {}) {
  const headers = { ...(request.headers || {}), "X-CSRF-Token": await getCsrfToken() };
  return fetch(apiUrl(url), { ...request, headers });
}

export async function callJsonApi(endpoint, data) {
  const response = await fetchApi(endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify(data),
  });
  if (!response.ok) throw new Error(await response.text());
  return response.json();
}

globalThis.fetchApi = fetchApi;
