"""A0 `_memory` recall: on iteration 0 and every `memory_recall_interval`, start
`asyncio.create_task(asyncio.wait_for(self.search_memories(...), timeout=30))` and store it in
`agent.data["_recall_memories_task"]`. The search: query = user message + "\\n\\n" + history[-10000:];
memories (limit 12, filter main/fragments) and solutions (limit 8, filter solutions), threshold 0.7,
then truncation to 5 and 3; page_content joined into `loop_data.extras_persistent`."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import LoopData
from helpers.extension import Extension
from plugins._memory.helpers.memory import Memory

from helpers import errors, log, plugins

DATA_NAME_TASK = "_recall_memories_task"
DATA_NAME_ITER = "_recall_memories_iter"
SEARCH_TIMEOUT = 30


class RecallMemories(Extension):
    async def execute(self, loop_data: LoopData | None = None, **kwargs: Any) -> None:
        if not self.agent or loop_data is None:
            return
        config = plugins.get_plugin_config("_memory", self.agent)
        if not config or not config["memory_recall_enabled"]:
            return
        task = None
        if loop_data.iteration % config["memory_recall_interval"] == 0:
            log_item = self.agent.context.log.log(type="util", heading="Searching memories...")
            task = asyncio.create_task(
                asyncio.wait_for(
                    self.search_memories(loop_data=loop_data, log_item=log_item, **kwargs),
                    timeout=SEARCH_TIMEOUT,
                )
            )
        self.agent.set_data(DATA_NAME_TASK, task)
        self.agent.set_data(DATA_NAME_ITER, loop_data.iteration)

    async def search_memories(self, log_item: log.LogItem, loop_data: LoopData, **kwargs: Any) -> None:
        if not self.agent:
            return
        extras = loop_data.extras_persistent
        extras.pop("memories", None)
        extras.pop("solutions", None)
        config = plugins.get_plugin_config("_memory", self.agent)
        if not config:
            return
        user_instruction = loop_data.user_message.output_text() if loop_data.user_message else "None"
        history = self.agent.history.output_text()[-config["memory_recall_history_len"] :]
        query = await self._query(config, log_item, user_instruction, history)
        if not query or len(query) <= 3:
            log_item.update(query="No relevant memory query generated, skipping search")
            return

        db = await Memory.get(self.agent)
        memories = await db.search_similarity_threshold(
            query=query,
            limit=config["memory_recall_memories_max_search"],
            threshold=config["memory_recall_similarity_threshold"],
            filter=f"area == '{Memory.Area.MAIN.value}' or area == '{Memory.Area.FRAGMENTS.value}'",
        )
        solutions = await db.search_similarity_threshold(
            query=query,
            limit=config["memory_recall_solutions_max_search"],
            threshold=config["memory_recall_similarity_threshold"],
            filter=f"area == '{Memory.Area.SOLUTIONS.value}'",
        )
        if not memories and not solutions:
            log_item.update(heading="No memories or solutions found")
            return

        memories = memories[: config["memory_recall_memories_max_result"]]
        solutions = solutions[: config["memory_recall_solutions_max_result"]]
        log_item.update(heading=f"{len(memories)} memories and {len(solutions)} relevant solutions found")
        memories_txt = "\n\n".join(m.page_content for m in memories)
        solutions_txt = "\n\n".join(s.page_content for s in solutions)
        if memories_txt:
            log_item.update(memories=memories_txt)
            extras["memories"] = self.agent.parse_prompt("agent.system.memories.md", memories=memories_txt)
        if solutions_txt:
            log_item.update(solutions=solutions_txt)
            extras["solutions"] = self.agent.parse_prompt("agent.system.solutions.md", solutions=solutions_txt)

    async def _query(self, config: dict[str, Any], log_item: log.LogItem, user_instruction: str, history: str) -> str:
        """The raw message + history, or (with `memory_recall_query_prep`) the utility model's query."""
        if not config["memory_recall_query_prep"]:
            return user_instruction + "\n\n" + history
        assert self.agent is not None
        try:
            query = await self.agent.call_utility_model(
                system=self.agent.read_prompt("memory.memories_query.sys.md"),
                message=self.agent.read_prompt(
                    "memory.memories_query.msg.md", history=history, message=user_instruction
                ),
            )
            query = query.strip()
            log_item.update(query=query)
        except Exception as e:
            self.agent.context.log.log(
                type="warning", heading="Recall memories extension error:", content=errors.format_error(e)
            )
            query = ""
        if not query:
            log_item.update(heading="Failed to generate memory query")
        return query
