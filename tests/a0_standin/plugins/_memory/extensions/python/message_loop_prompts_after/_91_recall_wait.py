"""A0 `_memory` recall wait: await the recall task in the same pass unless `memory_recall_delayed`
(then only on later iterations). Errors of the task surface here."""

from __future__ import annotations

from typing import Any

from agent import LoopData
from helpers.extension import Extension
from plugins._memory.extensions.python.message_loop_prompts_after._50_recall_memories import (
    DATA_NAME_ITER,
    DATA_NAME_TASK,
)

from helpers import plugins


class RecallWait(Extension):
    async def execute(self, loop_data: LoopData | None = None, **kwargs: Any) -> None:
        if not self.agent or loop_data is None:
            return
        config = plugins.get_plugin_config("_memory", self.agent)
        if not config:
            return
        task = self.agent.get_data(DATA_NAME_TASK)
        iteration = self.agent.get_data(DATA_NAME_ITER) or 0
        if task and not task.done():
            if config["memory_recall_delayed"] and iteration == loop_data.iteration:
                loop_data.extras_temporary["memory_recall_delayed"] = self.agent.read_prompt(
                    "memory.recall_delay_msg.md"
                )
                return
            await task
