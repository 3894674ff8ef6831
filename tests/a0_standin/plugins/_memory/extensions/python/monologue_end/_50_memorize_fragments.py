"""A0 `_memory` monologue_end/_50_memorize_fragments: memorize in the
BACKGROUND (`DeferredTask(thread_name=THREAD_BACKGROUND)`: another thread and event loop, which
inherits the caller's ContextVars). The utility model lists what to remember (a JSON list); each
entry goes through consolidation (memorize passes `max_similar_memories=8`) or, with consolidation
off, through `delete_documents_by_query(query=..., threshold=0.9, filter="area=='fragments'")`."""

from __future__ import annotations

from typing import Any, ClassVar

from agent import LoopData
from helpers.defer import THREAD_BACKGROUND, DeferredTask
from helpers.dirty_json import DirtyJson
from helpers.extension import Extension
from helpers.log import LogItem
from plugins._memory.helpers.memory import Memory
from plugins._memory.tools.memory_load import DEFAULT_THRESHOLD as DEFAULT_MEMORY_THRESHOLD

from helpers import errors, plugins


class MemorizeMemories(Extension):
    AREA: ClassVar[str] = Memory.Area.FRAGMENTS.value
    SYSTEM_PROMPT: ClassVar[str] = "memory.memories_sum.sys.md"

    def execute(self, loop_data: LoopData | None = None, **kwargs: Any) -> None:
        if not self.agent:
            return
        config = plugins.get_plugin_config("_memory", self.agent)
        if not config or not config["memory_memorize_enabled"]:
            return
        log_item = self.agent.context.log.log(type="util", heading="Memorizing new information...")
        DeferredTask(thread_name=THREAD_BACKGROUND).start_task(self.memorize, loop_data, log_item)

    async def memorize(self, loop_data: LoopData | None, log_item: LogItem, **kwargs: Any) -> None:
        if not self.agent:
            return
        try:
            config = plugins.get_plugin_config("_memory", self.agent)
            if not config:
                return
            entries = await self._entries(log_item)
            if entries:
                await self._store(config, entries, log_item)
        except Exception as e:
            self.agent.context.log.log(
                type="warning", heading="Memorize memories extension error", content=errors.format_error(e)
            )

    async def _entries(self, log_item: LogItem) -> list[str]:
        assert self.agent is not None
        answer = await self.agent.call_utility_model(
            system=self.agent.read_prompt(self.SYSTEM_PROMPT),
            message=self.agent.concat_messages(self.agent.history),
            background=True,
        )
        log_item.update(content=answer)
        if not answer or not answer.strip():
            log_item.update(heading="No response from utility model.")
            return []
        parsed = DirtyJson.parse_string(answer.strip())
        if isinstance(parsed, str | dict):
            parsed = [parsed]
        if not isinstance(parsed, list) or not parsed:
            log_item.update(heading="No useful information to memorize.")
            return []
        return [str(entry) for entry in parsed]

    async def _store(self, config: dict[str, Any], entries: list[str], log_item: LogItem) -> None:
        assert self.agent is not None
        db = await Memory.get(self.agent)
        removed = []
        for text in entries:
            if config["memory_memorize_consolidation"]:
                from plugins._memory.helpers.memory_consolidation import create_memory_consolidator

                consolidator = create_memory_consolidator(
                    self.agent,
                    similarity_threshold=DEFAULT_MEMORY_THRESHOLD,
                    max_similar_memories=8,
                    max_llm_context_memories=4,
                )
                await consolidator.process_new_memory(
                    new_memory=text, area=self.AREA, metadata={"area": self.AREA}, log_item=None
                )
                continue
            if config["memory_memorize_replace_threshold"] > 0:
                removed += await db.delete_documents_by_query(
                    query=text,
                    threshold=config["memory_memorize_replace_threshold"],
                    filter=f"area=='{self.AREA}'",
                )
                if removed:
                    log_item.update(replaced="\n\n".join(Memory.format_docs_plain(removed)))
            await db.insert_text(text=text, metadata={"area": self.AREA})
        log_item.update(heading=f"{len(entries)} entries memorized.", result=f"{len(entries)} entries memorized.")
