"""A forked child starts afresh (``process.singletons``: the at-fork hook empties the anchor; ``calls.runtime``
starts one "again after a fork") and leaves the parent's runtime as it was. Across ``os.fork`` the child shares
the parent's sockets and the owner loop's epoll set but has none of its threads, so it may neither call into the
parent's owner loop nor finalise the parent's objects (a pooled connection closed in the child is unregistered
from the epoll set both processes share). multiprocessing's default start method on Linux is ``fork``."""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from support.deadlines import PATIENT_S
from support.encoding import encoding_scorer, recall
from support.servers import RunningServer, serve_in_thread
from usr.plugins.a0_reranker.core.config import RerankerConfig
from usr.plugins.a0_reranker.service import runtime

CHILD_RERANKED, CHILD_FAILED = 0, 3


@pytest.fixture
def warm_server() -> Iterator[tuple[RunningServer, RerankerConfig]]:
    runtime.shutdown()  # a fresh owner loop whose pooled connections are this server's
    with serve_in_thread("vllm", scorer=encoding_scorer) as server:
        config = RerankerConfig(endpoint=server.url, api="rerank", timeout=3.0)
        assert runtime.rerank(*recall(0, 4), config=config) is not None  # warm: keep-alive connections pooled
        yield server, config
    runtime.shutdown()


def fork_child(config: RerankerConfig) -> int | None:
    """Fork a child that reranks on a runtime of its own, collects its garbage (as any Python code soon does) and
    leaves; its exit status, or None when it had not ended within ``PATIENT_S`` (then it is killed)."""
    pid = os.fork()
    if pid == 0:
        code = CHILD_FAILED
        try:
            if runtime.rerank(*recall(9, 4), config=config.replace(timeout=PATIENT_S)) is not None:
                code = CHILD_RERANKED
            gc.collect()
        finally:
            os._exit(code)
    ended: list[int] = []
    waiter = threading.Thread(target=lambda: ended.append(os.waitpid(pid, 0)[1]), daemon=True)
    waiter.start()
    waiter.join(PATIENT_S)
    if not ended:
        os.kill(pid, signal.SIGKILL)
        waiter.join()
        return None
    return os.waitstatus_to_exitcode(ended[0])


def test_a_forked_child_starts_a_runtime_of_its_own_and_ends(warm_server: tuple[RunningServer, RerankerConfig]
                                                             ) -> None:
    """The child once hung for ever inside ``os.fork()`` itself: the at-fork hook dropped the parent's runtime,
    whose portal context (a suspended generator) then closed and waited on the parent's owner thread, which
    does not exist in the child."""
    _, config = warm_server
    assert fork_child(config) == CHILD_RERANKED


def test_a_forked_child_leaves_the_parents_pooled_connections_working(
        warm_server: tuple[RunningServer, RerankerConfig]) -> None:
    """What the child finalises of the parent's HTTP session it closes on the parent's loop: the pooled sockets
    leave the epoll set the processes share, and the parent's next rerank over one waits out its deadline."""
    server, config = warm_server
    fork_child(config)
    before = server.count("/rerank")
    result = runtime.rerank_result(*recall(1, 4), config=config)  # over a pooled connection
    assert result.ranking is not None, (result.reason, result.message)
    assert server.count("/rerank") == before + 1
