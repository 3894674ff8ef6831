"""A loopback web server that hosts ``webui/config.html`` the way Agent Zero v1.7's plugin-settings modal does.

It serves, at A0's own URLs, small stand-ins for the A0 front-end modules a plugin's panel meets
(``host/``: ``/js/api.js``, ``/js/AlpineStore.js``, ``/js/components.js``, ``/js/modals.js``, the
notification store, ``plugin-settings.html`` and its store), Alpine.js from the npm registry, and the
plugin's ``webui/`` folder as A0 does (``/plugins/<name>/webui/...``, found with ``find_plugin_dir``).
Its API is A0's: ``/api/csrf_token``, ``/api/plugins`` (``get_config``, ``get_default_config``,
``save_config``, answered by the A0 stand-in's ``api/plugins.py`` with its extension points), the lists the modal's scope selectors show
(``/api/plugins_list``, ``/api/projects`` ``list_options``, ``/api/agents`` ``list``) and
``/api/plugins/<plugin>/<stem>``, which
runs the plugin's REAL handler classes through the A0 stand-in's dispatch (CSRF checked, a thread and
event loop of their own as flask[async] gives them). Every API call is recorded for the tests.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from anyio.from_thread import start_blocking_portal

from support.ports import fresh_socket

HOST_FILES = Path(__file__).resolve().parent / "host"
RUNTIME_ID = "panel-host"

# A0 URL -> file in host/
PAGES: dict[str, str] = {
    "/": "index.html",
    "/host/boot.js": "boot.js",
    "/host/a0-style.css": "a0-style.css",
    "/js/api.js": "api.js",
    "/js/AlpineStore.js": "AlpineStore.js",
    "/js/components.js": "components.js",
    "/js/modals.js": "modals.js",
    "/components/notifications/notification-store.js": "notification-store.js",
    "/components/plugins/plugin-settings.html": "plugin-settings.html",
    "/components/plugins/plugin-settings-store.js": "plugin-settings-store.js",
}
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json"}


@dataclass(frozen=True)
class ApiCall:
    """One API request the page made, and what it got back."""

    path: str
    body: Any
    status: int
    reply: str

    def json(self) -> Any:
        return json.loads(self.reply)


class PanelHost:
    """The app; ``serve_panel_host`` runs it on 127.0.0.1 in a thread."""

    def __init__(self, alpine_js: Path) -> None:
        self.alpine_js = alpine_js
        self.csrf_token = secrets.token_hex(16)
        self.url = ""
        self._calls: list[ApiCall] = []
        self._lock = threading.Lock()

    # --- what the tests read ------------------------------------------------------------------

    def calls(self, path_prefix: str = "/api/") -> list[ApiCall]:
        with self._lock:
            return [call for call in self._calls if call.path.startswith(path_prefix)]

    def plugin_calls(self, stem: str) -> list[ApiCall]:
        return self.calls(f"/api/plugins/a0_reranker/{stem}")

    def forget_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    # --- the app ------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/vendor/alpine/alpine.min.js", self._alpine)
        app.router.add_get("/plugins/{plugin}/webui/{tail:.+}", self._plugin_asset)
        app.router.add_get("/api/csrf_token", self._csrf_token)
        app.router.add_post("/api/plugins", self._plugins_api)
        for path, answer in LIST_APIS.items():
            app.router.add_post(path, functools.partial(self._list_api, answer))
        app.router.add_post("/api/plugins/{plugin}/{stem}", self._plugin_api)
        for url in PAGES:
            app.router.add_get(url, self._page)
        return app

    async def _page(self, request: web.Request) -> web.StreamResponse:
        return _file(HOST_FILES / PAGES[request.path])

    async def _alpine(self, request: web.Request) -> web.StreamResponse:
        return _file(self.alpine_js)

    async def _plugin_asset(self, request: web.Request) -> web.StreamResponse:
        """As A0's ``_serve_plugin_asset``: only files under the plugin's ``webui/`` folder."""
        plugin_dir = _a0("helpers.plugins").find_plugin_dir(request.match_info["plugin"])
        if not plugin_dir:
            raise web.HTTPNotFound()
        webui = (Path(plugin_dir) / "webui").resolve()
        target = (webui / request.match_info["tail"]).resolve()
        if not target.is_relative_to(webui) or not target.is_file():
            raise web.HTTPNotFound()
        return _file(target)

    async def _csrf_token(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"ok": True, "token": self.csrf_token, "runtime_id": RUNTIME_ID})

    async def _plugins_api(self, request: web.Request) -> web.StreamResponse:
        """A0's own handler for the modal's actions (the stand-in's ``api/plugins.py``), through A0's dispatch,
        so a plugin's extensions of ``Plugins._get_config`` and the others run as they do in A0."""
        body = await _json_body(request)
        dispatch = _a0("helpers.api").dispatch_api
        result = await asyncio.to_thread(dispatch, "plugins", body if isinstance(body, dict) else {},
                                         csrf_ok=self._csrf_ok(request))
        response = web.Response(status=result.status, text=result.body, content_type=result.mimetype)
        return self._record(request.path, body, response)

    async def _list_api(self, answer: Any, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        if not self._csrf_ok(request):
            return self._record(request.path, body, web.Response(status=403, text="CSRF token missing or invalid"))
        reply = await asyncio.to_thread(answer, body if isinstance(body, dict) else {})
        return self._record(request.path, body, web.json_response(reply))

    async def _plugin_api(self, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        dispatch = _a0("helpers.api").dispatch_plugin_api
        result = await asyncio.to_thread(
            dispatch, request.match_info["plugin"], request.match_info["stem"], body, csrf_ok=self._csrf_ok(request)
        )
        response = web.Response(status=result.status, text=result.body, content_type=result.mimetype)
        return self._record(request.path, body, response)

    def _csrf_ok(self, request: web.Request) -> bool:
        return request.headers.get("X-CSRF-Token") == self.csrf_token

    def _record(self, path: str, body: Any, response: web.Response) -> web.Response:
        with self._lock:
            self._calls.append(ApiCall(path, body, response.status, response.text or ""))
        return response


def plugins_list(body: dict[str, Any]) -> dict[str, Any]:
    """A0's ``api/plugins_list.py`` for the fields the settings modal reads (``PluginListItem``)."""
    plugins = _a0("helpers.plugins")
    items = []
    for name in plugins.get_plugins_list():
        meta, plugin_dir = plugins.get_plugin_meta(name), Path(plugins.find_plugin_dir(name))
        items.append({"name": name, "path": str(plugin_dir), "display_name": meta.title or name,
                      "per_project_config": meta.per_project_config, "per_agent_config": meta.per_agent_config,
                      "always_enabled": meta.always_enabled,
                      "has_config_screen": (plugin_dir / "webui" / "config.html").is_file()})
    return {"ok": True, "plugins": items}


def projects_api(body: dict[str, Any]) -> dict[str, Any]:
    """A0's ``api/projects.py`` action ``list_options``: ``[{"key": name, "label": title or name}]``."""
    if body.get("action") != "list_options":
        return {"ok": False, "error": "Invalid action"}
    items = _a0("helpers.projects").get_active_projects_list()
    return {"ok": True, "data": [{"key": p["name"], "label": p["title"] or p["name"]} for p in items]}


def agents_api(body: dict[str, Any]) -> dict[str, Any]:
    """A0's ``api/agents.py`` action ``list``: ``subagents.get_all_agents_list()``."""
    if body.get("action") != "list":
        return {"ok": False, "error": "Invalid action"}
    return {"ok": True, "data": _a0("helpers.subagents").get_all_agents_list()}


LIST_APIS = {"/api/plugins_list": plugins_list, "/api/projects": projects_api, "/api/agents": agents_api}


@contextmanager
def serve_panel_host(alpine_js: Path) -> Iterator[PanelHost]:
    """Run the host on its own event loop in a background thread; yields it with ``.url`` set."""
    host = PanelHost(alpine_js)
    with start_blocking_portal(backend="asyncio") as portal:
        runner = portal.call(_start, host)
        try:
            yield host
        finally:
            portal.call(runner.cleanup)


async def _start(host: PanelHost) -> web.AppRunner:
    runner = web.AppRunner(host.app(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, fresh_socket()).start()
    address, port = runner.addresses[0][:2]
    host.url = f"http://{address}:{port}"
    return runner


def _file(path: Path) -> web.Response:
    content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
    return web.Response(body=path.read_bytes(), content_type=content_type, headers={"Cache-Control": "no-store"})


async def _json_body(request: web.Request) -> Any:
    """The JSON body, or None when there is none or it is not JSON (A0 then hands the handler ``{}``)."""
    if request.content_type != "application/json":
        return None
    try:
        return await request.json()
    except ValueError:
        return None


def _a0(module: str) -> Any:
    """A module of the A0 stand-in root imported now (the tests switch roots with ``use_root``)."""
    return importlib.import_module(module)
