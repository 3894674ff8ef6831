"""A0 `helpers/api.py`: `ApiHandler` and plugin route dispatch, without Flask.

`POST /api/plugins/<plugin>/<stem>` loads `<plugin_dir>/api/<stem>.py` (found with
`find_plugin_dir`, so a DISABLED plugin's handlers still answer), takes its one `ApiHandler`
subclass, checks the method and the security classmethods, and sends: a dict -> JSON 200, a
`Response` -> as is, an uncaught exception -> 500 text/plain with the formatted error.

Test entry points: `dispatch_api(path, ...)` (a built-in handler such as `api/plugins.py`, or a
plugin's at `plugins/<plugin>/<stem>`) and `dispatch_plugin_api(plugin, stem, ...)` run the handler on
a fresh event loop in another thread, as flask[async] does (never the agent loop); their `_async`
forms await it on the caller's loop. All return an `ApiResult`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import cache
from helpers.errors import format_error
from helpers.print_style import PrintStyle

ThreadLockType = Any
CACHE_AREA = "api_handlers(api)"

Input = dict
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Response:
    """Flask-like response: `Response(response=..., status=..., mimetype=...)` or positional."""

    def __init__(
        self,
        response: str | bytes = "",
        status: int = 200,
        headers: dict[str, str] | None = None,
        mimetype: str | None = None,
        content_type: str | None = None,
    ) -> None:
        self.response = response
        self.status_code = status
        self.headers = dict(headers or {})
        self.mimetype = mimetype or (content_type or "text/html").split(";")[0]

    def get_data(self, as_text: bool = False) -> str | bytes:
        data = self.response
        if as_text and isinstance(data, bytes):
            return data.decode("utf-8")
        if not as_text and isinstance(data, str):
            return data.encode("utf-8")
        return data


@dataclass
class Request:
    """The parts of a Flask request that handlers read."""

    method: str = "POST"
    data: bytes = b""
    is_json: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    remote_addr: str = "127.0.0.1"

    def get_json(self) -> Any:
        return json.loads(self.data.decode("utf-8")) if self.data else None


Output = dict[str, Any] | Response


class ApiHandler:
    def __init__(self, app: Any, thread_lock: ThreadLockType) -> None:
        self.app = app
        self.thread_lock = thread_lock

    @classmethod
    def requires_loopback(cls) -> bool:
        return False

    @classmethod
    def requires_api_key(cls) -> bool:
        return False

    @classmethod
    def requires_auth(cls) -> bool:
        return True

    @classmethod
    def get_methods(cls) -> list[str]:
        return ["POST"]

    @classmethod
    def requires_csrf(cls) -> bool:
        return cls.requires_auth()

    async def process(self, input: Input, request: Request) -> Output:
        raise NotImplementedError

    async def handle_request(self, request: Request) -> Response:
        """JSON body (or `{}`) in; dict -> JSON 200, `Response` passed through, error -> 500 text."""
        try:
            input_data: Input = {}
            if request.is_json and request.data:
                try:
                    input_data = request.get_json()
                except ValueError as e:
                    PrintStyle().print(f"Error parsing JSON: {e}")
            output = await self.process(input_data, request)
            if isinstance(output, Response):
                return output
            return Response(response=json.dumps(output), status=200, mimetype="application/json")
        except Exception as e:
            error = format_error(e)
            PrintStyle.error(f"API error: {error}")
            return Response(response=error, status=500, mimetype="text/plain")


@dataclass(frozen=True)
class ApiResult:
    """What A0 would send back for one call."""

    status: int
    mimetype: str
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def _handler_class(path: str) -> type[ApiHandler] | None:
    """As A0's route: the built-in `api/<path>.py` first (loaded by path under its stem, so
    `api/plugins.py` is the module `plugins`), then `<plugin>/api/<handler>.py` for `plugins/<plugin>/<handler>`."""
    from helpers import files, plugins
    from helpers.modules import load_classes_from_file

    cached = cache.get(CACHE_AREA, path)
    if cached is not None:
        return cached
    candidates = [Path(files.get_abs_path("api", f"{path}.py"))]
    parts = path.split("/", 2)
    if len(parts) == 3 and parts[0] == "plugins" and (plugin_dir := plugins.find_plugin_dir(parts[1])):
        candidates.append(Path(plugin_dir) / "api" / f"{parts[2]}.py")
    for file in candidates:
        if not file.is_file():
            continue
        classes = load_classes_from_file(str(file), ApiHandler)
        if classes:
            cache.add(CACHE_AREA, path, classes[0])
            return classes[0]
    return None


def _security_refusal(cls: type[ApiHandler], request: Request, input_data: Any, csrf_ok: bool) -> Response | None:
    """The decorators `register_api_route` wraps a handler with (loopback, auth, api key, csrf).
    The stand-in's session is always logged in (no credentials configured)."""
    from helpers.settings import get_settings

    if cls.requires_loopback() and request.remote_addr not in LOOPBACK:
        return Response("Access denied.", 403)
    if cls.requires_api_key():
        token = get_settings()["mcp_server_token"]
        sent = request.headers.get("X-API-KEY") or (input_data or {}).get("api_key")
        if not sent:
            return Response("API key required", 401)
        if sent != token:
            return Response("Invalid API key", 401)
    if cls.requires_csrf() and not csrf_ok:
        return Response("CSRF token missing or invalid", 403)
    return None


async def dispatch_api_async(
    path: str,
    input: Any = None,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    remote_addr: str = "127.0.0.1",
    csrf_ok: bool = True,
) -> ApiResult:
    """Call A0's `/api/<path>` on the current loop: a built-in handler, or a plugin's (`plugins/<plugin>/<stem>`)."""
    body = b"" if input is None else json.dumps(input).encode("utf-8")
    request = Request(
        method=method, data=body, is_json=input is not None, headers=dict(headers or {}), remote_addr=remote_addr
    )
    cls = _handler_class(path)
    if cls is None:
        response = Response(f"API endpoint not found: {path}", 404)
    elif method not in cls.get_methods():
        response = Response(f"Method {method} not allowed for: {path}", 405)
    else:
        response = _security_refusal(cls, request, input, csrf_ok) or await cls(None, threading.RLock()).handle_request(
            request=request
        )
    text = response.get_data(as_text=True)
    return ApiResult(status=response.status_code, mimetype=response.mimetype, body=str(text))


async def dispatch_plugin_api_async(plugin_name: str, stem: str, input: Any = None, **kwargs: Any) -> ApiResult:
    """Call `<plugin>/api/<stem>.py` on the current loop as A0's `/api/plugins/<plugin>/<stem>` route."""
    return await dispatch_api_async(f"plugins/{plugin_name}/{stem}", input, **kwargs)


def dispatch_api(path: str, input: Any = None, **kwargs: Any) -> ApiResult:
    """Blocking variant: runs the call on a new event loop in a new thread, as flask[async] does."""
    result: list[ApiResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(dispatch_api_async(path, input, **kwargs)))
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run, name="FlaskRequest")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def dispatch_plugin_api(plugin_name: str, stem: str, input: Any = None, **kwargs: Any) -> ApiResult:
    """Blocking `dispatch_plugin_api_async`, on a new event loop in a new thread, as flask[async] does."""
    return dispatch_api(f"plugins/{plugin_name}/{stem}", input, **kwargs)
