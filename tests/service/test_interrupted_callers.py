"""Every failure path gives back what it took, whatever interrupts the caller: a blocking caller stopped
by Ctrl-C while it waits, an awaiting caller cancelled in the very turn its result arrives, an owner
loop whose start fails half-way. Each checks the state afterwards (counters, the owner's work, threads),
not just what the caller got."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
import time

import pytest

from support.encoding import encoding_scorer, recall
from support.servers import serve_in_thread
from usr.plugins.a0_reranker.core import deadline as clock
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.process import singletons
from usr.plugins.a0_reranker.service import calls, runtime
from usr.plugins.a0_reranker.service.calls import Handover

OWNER_THREAD = "a0-reranker-owner"


def in_flight_until_zero(url: str, within_s: float = 10.0) -> int | None:
    """The requests in flight to ``url``, read until none are left or ``within_s`` has passed (well inside
    the 30 s deadline of the work that must have been cancelled: left to run, it would still be waiting).
    Only this server's: the runtime is the process's, and an earlier test's servers are not this one."""
    give_up = time.monotonic() + within_s
    while (left := _in_flight(url)) != 0 and time.monotonic() < give_up:
        threading.Event().wait(0.005)
    return left


def _in_flight(url: str) -> int | None:
    """None when the snapshot lacks the live state (the owner loop did not answer in time)."""
    found = [replica.in_flight for replica in runtime.statistics().replicas if replica.url == url]
    return sum(found) if found else None


def test_a_blocking_caller_interrupted_while_it_waits_cancels_its_work_and_is_counted_cancelled() -> None:
    """Ctrl-C reaches a thread blocked in ``rerank()`` (the CLI's main thread, say): the interrupt is
    raised as ever, the work handed to the owner loop is cancelled at once instead of holding a slot
    and a request until its deadline, and the call is counted as cancelled, not left started forever."""
    runtime.shutdown()  # a fresh owner loop: an earlier test's request left in flight to a server whose port the
    # system has since handed to this test's server would count as this one's (it held the figure at 1, once)
    with serve_in_thread("vllm", scorer=encoding_scorer) as server:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=30.0)
        runtime.stats_recorder().reset()
        assert runtime.rerank(*recall(0, 4), config=config) is not None  # warm: detected, connected
        server.gate.hold(lambda request: request.method == "POST")
        main = threading.main_thread().ident
        assert main == threading.get_ident()
        interrupter = threading.Thread(
            target=lambda: (server.gate.wait_held_sync(1), signal.pthread_kill(main, signal.SIGINT)))
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                runtime.rerank_result(*recall(1, 4), config=config)
            interrupter.join()
            assert in_flight_until_zero(server.url) == 0  # the held request was given up, not left to its deadline
        finally:
            server.gate.release()
        stats = runtime.stats_recorder().snapshot()
        assert (stats.reranks, stats.reranked, stats.cancelled, stats.fallback_total) == (2, 1, 1, 0)


@pytest.mark.anyio
async def test_a_caller_cancelled_in_the_turn_its_result_arrives_is_cancelled_not_answered() -> None:
    """Whatever turn of the loop the cancellation lands in, relative to the owner's result: if the
    caller's task was still waiting when it was cancelled, it ends cancelled (asyncio's ``wait_for`` on
    Python 3.11 returns the result instead when both land in one turn, and the caller, told to stop,
    goes on as if answered)."""
    for steps in range(8):
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        waiting = asyncio.create_task(Handover(future, clock.now() + 10.0, "late").result_async())
        await asyncio.sleep(0)  # the caller now waits on the owner's future
        future.set_result("answered")
        for _ in range(steps):
            await asyncio.sleep(0)
        if waiting.cancel():
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert waiting.cancelled(), steps
        else:  # the result had reached the caller before the cancellation: nothing to cancel
            assert await waiting == "answered"


def owner_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == OWNER_THREAD]


@pytest.fixture
def no_runtime() -> object:
    runtime.shutdown()
    threads_before = threading.active_count()
    yield threads_before
    runtime.shutdown()


def test_an_owner_loop_whose_service_fails_to_start_leaves_no_loop_thread_behind(
        no_runtime: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_service(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the service could not be built")

    monkeypatch.setattr(calls, "RerankService", broken_service)
    with pytest.raises(RuntimeError, match="could not be built"):
        runtime.runtime()
    assert owner_threads() == []
    assert threading.active_count() == no_runtime
    monkeypatch.undo()
    assert runtime.rerank(*recall(0, 2), config=RerankerConfig(endpoint="http://127.0.0.1:9", timeout=0.5)) is None
    assert len(owner_threads()) == 1  # the next call starts a working one


def test_an_owner_loop_that_fails_on_its_own_thread_stops_that_thread(
        no_runtime: int, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken_adopt(name: str) -> object:
        raise RuntimeError("the loop could not be adopted")

    monkeypatch.setattr(singletons, "_adopt", broken_adopt)
    with pytest.raises(RuntimeError, match="could not be adopted"):
        singletons.OwnerLoop().start()
    assert threading.active_count() == no_runtime


class _OnceOnly(list[str]):
    """A caller's sequence that can be read once: the check passes, the second reading fails."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(texts)
        self.read = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.read += 1
        if self.read > 1:
            raise RuntimeError("read twice")
        return super().__iter__()


@pytest.mark.anyio
async def test_a_sequence_that_fails_when_read_again_is_a_counted_fallback_not_an_error_raised() -> None:
    """Found in review: the documents were copied after the start was counted and outside the guard, so
    this raised out of a call that raises nothing but cancellation, with a start never settled. It is the
    caller's bad input, refused before any start is counted, as a first reading that fails is."""
    runtime.stats_recorder().reset()
    config = RerankerConfig(endpoint="http://127.0.0.1:9", timeout=1.0)
    result = await runtime.rerank_result_async("q", _OnceOnly(["a", "b"]), config=config)
    assert result.ranking is None and result.reason == "bad_input"
    stats = runtime.stats_recorder().snapshot()
    assert stats.reranks == 0 and stats.fallback_total == 1 and stats.cancelled == 0
