"""Reliability-tier fixtures: counters reset per test, loopback servers each on their own thread.

Servers run on their own event loop so that a test may call the blocking ``rerank()`` (in a worker
thread) while the async recall runs on the test's loop, as A0's threads and loops do.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from support.servers import RunningServer, serve_in_thread
from usr.plugins.a0_reranker.service import runtime

Serve = Callable[..., RunningServer]


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    runtime.stats_recorder().reset()
    yield


@pytest.fixture(scope="module", autouse=True)
def owner_loop_and_heap() -> Iterator[None]:
    """A fresh owner loop per module (no breaker, route or batcher leaks between modules), and the
    heap of everything imported so far frozen: a full garbage collection then scans only what the
    tests create, so its pause cannot land inside a ``rerank_timeout`` + 100 ms window and fail an
    acceptance check for a reason that is the test process's, not the engine's."""
    runtime.shutdown()
    gc.collect()
    gc.freeze()
    yield
    runtime.shutdown()
    gc.unfreeze()
    gc.collect()


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(kind, **options)`` starts a server in a thread; all are closed after the test."""
    with ExitStack() as stack:

        def start(kind: str, **options: Any) -> RunningServer:
            return stack.enter_context(serve_in_thread(kind, **options))

        yield start


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record, from the plugin's logger and from any other (aiohttp, asyncio), at DEBUG."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="a0_reranker")
    yield caplog


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread standing in for A0's, so hypothesis drives a plain function."""
    with start_blocking_portal(backend="asyncio") as running:
        yield running
