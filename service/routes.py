"""Routes: how to talk to each replica, detected once and cached.

Detection results are cached per endpoint, API mode, model, key and TLS settings (async-lru, with a
TTL; concurrent identical detections share one run); the timeout and the instruction do not change
which API wins, so they are not part of the key. A detection is an attempt like any other: it asks the
endpoint's breaker for a permit (a probe while half-open) and waits out a Retry-After. It runs to its
own end even when its callers leave (its deadline bounds it), so that a server which never answers
is counted against the breaker and a server which answers late is remembered.

With several replicas each is detected on its own (its path and dialect may differ). A call uses the
replicas whose route is known now, and waits only while none is: a replica being detected (or one
that is down) never holds up a call that others can answer. A route already known is read without a
task or a turn of the loop, so the recalls of a burst reach their queue together.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from async_lru import alru_cache

from ..core import deadline as clock
from ..core.config import RerankerConfig
from ..core.errors import DeadlineExceeded, RateLimited, RerankError
from .detection import Route, resolve_route
from .endpoints import Endpoint
from .transport import HttpTransport

DETECTION_TTL_S: Final = 600.0
RATE_LIMIT_DEFAULT_S: Final = 1.0  # a 429 during detection without Retry-After holds the endpoint this long
_KEY_FIELDS: Final = ("endpoint", "api", "model", "api_key", "tls_verify", "ca_bundle")


@dataclass(frozen=True)
class _Detection:
    """One detection's arguments; equal (and cached together) when only the deadline or the other
    settings differ, which do not change the answer."""

    key: tuple[object, ...]
    config: RerankerConfig = dataclasses.field(compare=False)
    deadline: float = dataclasses.field(compare=False, default=0.0)
    endpoint: Endpoint | None = dataclasses.field(compare=False, default=None)

    @classmethod
    def of(cls, config: RerankerConfig, deadline: float = 0.0, endpoint: Endpoint | None = None) -> _Detection:
        return cls(tuple(getattr(config, name) for name in _KEY_FIELDS), config, deadline, endpoint)


class RouteBook:
    """Use on the owner loop only."""

    def __init__(self, transport: HttpTransport, on_detection: Callable[[], None] = lambda: None) -> None:
        self._transport = transport
        self._on_detection = on_detection  # counted: detections that keep coming say health is forgotten
        self._detect = alru_cache(maxsize=128, ttl=DETECTION_TTL_S)(self._detect_uncached)
        self._running: dict[tuple[object, ...], _Detection] = {}  # key -> the detection under way

    @property
    def cached(self) -> int:
        return self._detect.cache_info().currsize

    @property
    def running(self) -> int:
        """Detections under way (each ends by its deadline at the latest)."""
        return len(self._running)

    async def routes(self, config: RerankerConfig, deadline: float, endpoints: Sequence[Endpoint]
                     ) -> dict[str, Route]:
        """The known routes of ``endpoints`` (replica URL -> route, at least one), detecting the
        others; waits only while none is known. Raises the first replica's error when none works."""
        detections = [_Detection.of(config.for_replica(e.url), deadline, e) for e in endpoints]
        # One shared with an earlier caller runs to that caller's deadline: leave it at ours.
        outlasts_us = any(d.key in self._running and self._running[d.key].deadline > deadline for d in detections)
        routes: dict[str, Route] = {}
        errors: dict[str, BaseException] = {}
        tasks: dict[asyncio.Task[Route], str] = {}
        for detection in detections:
            assert detection.endpoint is not None
            url = detection.endpoint.url
            if self._known(detection):  # a finished detection: its result comes back without a task or a wait
                try:
                    routes[url] = await self._detect(detection)
                except Exception as exc:  # a failed one not yet evicted from the cache
                    errors[url] = exc
            else:
                tasks[self._detection_task(detection)] = url
        pending = set(tasks)
        while pending and not routes:
            timeout = max(0.0, deadline - clock.now()) if outlasts_us else None
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise DeadlineExceeded("no replica's API was known before the deadline (detection still running)")
            for task in done:
                _collect(task, tasks[task], routes, errors)
        if not routes:
            raise next(errors[e.url] for e in endpoints if e.url in errors)
        return {e.url: routes[e.url] for e in endpoints if e.url in routes}

    def forget(self, config: RerankerConfig) -> None:
        """Every replica's cached route (a status said a route no longer holds, or a probe failed)."""
        for url in config.endpoints:
            self._detect.cache_invalidate(_Detection.of(config.for_replica(url)))

    def forget_endpoint(self, endpoint: Endpoint) -> None:
        """The endpoint's breaker opened: when the server is back, detect again (it may be another now)."""
        for key in endpoint.route_keys:
            self._detect.cache_invalidate(_Detection(key, RerankerConfig()))
        endpoint.route_keys.clear()

    async def close(self) -> None:
        await self._detect.cache_close()

    def _known(self, detection: _Detection) -> bool:
        """Cached and no longer running: awaiting it returns at once."""
        return self._detect.cache_contains(detection) and detection.key not in self._running

    def _detection_task(self, detection: _Detection) -> asyncio.Task[Route]:
        """A task of its own, so a caller who leaves does not cancel a detection others may share."""
        assert detection.endpoint is not None
        detection.endpoint.route_keys.add(detection.key)
        if not self._detect.cache_contains(detection):  # this call starts it (or joins one just started)
            self._running.setdefault(detection.key, detection)
        task = asyncio.ensure_future(self._detect(detection))
        task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return task

    async def _detect_uncached(self, detection: _Detection) -> Route:
        assert detection.endpoint is not None
        state = detection.endpoint.state
        self._running[detection.key] = detection
        try:
            await state.wait_out_retry_after(detection.deadline)
            with state.breaker.attempt():  # detection is an attempt too: a probe while half-open
                self._on_detection()
                return await resolve_route(self._transport, detection.config, detection.deadline)
        except RateLimited as exc:
            wait = exc.retry_after if exc.retry_after is not None else RATE_LIMIT_DEFAULT_S
            state.hold_off(clock.now() + wait)
            raise
        finally:  # a detection forgotten (cancelled) may end after its successor began: clear only its own mark
            if self._running.get(detection.key) is detection:
                del self._running[detection.key]


def _collect(task: asyncio.Task[Route], url: str, routes: dict[str, Route], errors: dict[str, BaseException]
             ) -> None:
    if task.cancelled():
        errors[url] = RerankError("detection was cancelled")
    elif (error := task.exception()) is not None:
        errors[url] = error
    else:
        routes[url] = task.result()
