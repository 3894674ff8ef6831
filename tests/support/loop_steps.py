"""Wait on one event loop for a state the test names, not for a number of loop steps.

``await asyncio.sleep(0)`` lets the tasks made so far take a step, which is what a test usually means by
"let them enqueue"; but it says nothing of what the test waits for, and it stops being enough as soon as
one of them needs a second step. ``until`` names the state (the batcher holds 40 queued pairs, two
requests are in flight) and fails when it never comes; ``until_suspended`` waits for tasks to have started
and be waiting on something, where the code offers no state to look at.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

STEPS_WITHIN_S = 5.0


async def until(condition: Callable[[], bool], *, within_s: float = STEPS_WITHIN_S) -> None:
    """Let the loop run, one step at a time, until ``condition()`` holds; fail after ``within_s``."""
    async with asyncio.timeout(within_s):
        while True:
            if condition():
                return
            await asyncio.sleep(0)  # one step of the loop; the condition decides when to go on


async def until_suspended(*tasks: asyncio.Task[object]) -> None:
    """Until each task has started and waits on something (a future, a lock, a slot)."""
    await until(lambda: all(inspect.getcoroutinestate(task.get_coro()) == inspect.CORO_SUSPENDED  # type: ignore[arg-type]
                            for task in tasks))
