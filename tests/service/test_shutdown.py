"""Shutting down gives back the HTTP session whatever still runs: recalls arriving on the owner loop while the
service closes, or after, are refused instead of opening a session nothing would close. Sequenced by gates."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from support.encoding import encoding_scorer, recall
from support.loop_steps import until_suspended
from support.servers import start_server
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.core.statistics import StatsRecorder
from usr.plugins.a0_reranker.process import singletons
from usr.plugins.a0_reranker.process.singletons import OwnerLoop
from usr.plugins.a0_reranker.service.reranker_service import RerankService

pytestmark = pytest.mark.anyio


async def test_recalls_arriving_while_the_service_closes_are_refused_and_open_no_session() -> None:
    """``stop()`` (shutdown, uninstall, an update) closes the service while other threads' recalls keep landing on
    the owner loop. One arriving while the close waits for a request in flight to unwind, and one after it, must
    be refused at once: they once went on to send, the second on a new pooled session opened after the old one
    had closed, which nothing ever closed (aiohttp's "Unclosed client session" when it was collected)."""
    service = RerankService(StatsRecorder())
    server = await start_server("vllm", scorer=encoding_scorer)
    try:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=5.0)

        def call(q: int, **changes: object) -> asyncio.Task[object]:
            return asyncio.create_task(service.rerank(*recall(q, 4), config.replace(**changes),
                                                      time.monotonic() + config.timeout))

        assert (await call(0)).ranking is not None  # type: ignore[attr-defined]
        sessions = list(service._transport._sessions.values())
        server.gate.hold(lambda r: r.method == "POST")
        held = call(1)
        await server.gate.wait_held(1)
        closing = asyncio.create_task(service.close())
        await until_suspended(closing)  # the held request's batcher is unwinding
        during = call(2, instruction="settings seen for the first time")  # a batcher of its own
        await closing
        after = call(3)
        results = [await task for task in (held, during, after)]
        assert [r.ranking for r in results] == [None, None, None]  # type: ignore[attr-defined]
        assert [r.message for r in results[1:]] == ["the reranker is shutting down"] * 2  # type: ignore[attr-defined]
        assert server.count("/rerank") == 2  # the warm call and the one held: nothing went out after the close
        assert sessions and all(session.closed for session in sessions)
        assert service._transport._sessions == {}  # none opened since
    finally:
        server.gate.release()
        await server.close()


# --- the owner loop's own stop (found in review: each failed before its fix) ------------------------------


def test_concurrent_stops_run_each_closer_once() -> None:
    """Shutdown and an update can stop the owner loop from two threads at once: both ran every closer."""
    owner = OwnerLoop().start()
    closed: list[int] = []

    async def closer() -> None:
        closed.append(1)

    owner.close_with(closer)
    start = threading.Barrier(8)
    stoppers = [threading.Thread(target=lambda: (start.wait(), owner.stop())) for _ in range(8)]
    for thread in stoppers:
        thread.start()
    for thread in stoppers:
        thread.join()
    assert closed == [1] and not owner.alive


def test_work_handed_over_while_the_loop_stops_is_cancelled_not_run() -> None:
    """Work that lands while the closers run started after the running work was cancelled, and ran beside the
    closers. It must come back cancelled (its caller reports the reranker stopped), with nothing of it run."""
    owner = OwnerLoop().start()
    closing, gate, ran = threading.Event(), asyncio.Event(), []

    async def closer() -> None:
        closing.set()
        await gate.wait()

    async def work() -> str:
        ran.append(1)
        return "ran"

    owner.close_with(closer)
    stopper = threading.Thread(target=owner.stop)
    stopper.start()
    try:
        assert closing.wait(timeout=30)
        handed_over = owner.submit(work)
        with pytest.raises(concurrent.futures.CancelledError):
            handed_over.result(timeout=30)
    finally:
        assert owner.loop is not None
        owner.loop.call_soon_threadsafe(gate.set)
        stopper.join()
    assert ran == [] and owner.submit(work).cancelled()  # after the stop too
    assert not owner.alive and not stopper.is_alive()


def test_a_closer_that_hangs_does_not_hang_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``stop`` runs at exit: a close stuck on a dead peer held it, and the process, for ever."""
    monkeypatch.setattr(singletons, "CANCEL_WAIT_S", 0.05)
    owner = OwnerLoop().start()
    after: list[int] = []

    async def stuck() -> None:
        await asyncio.Event().wait()

    async def next_closer() -> None:
        after.append(1)

    owner.close_with(stuck)
    owner.close_with(next_closer)
    stopper = threading.Thread(target=owner.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=30)
    assert not stopper.is_alive() and not owner.alive and after == [1]
