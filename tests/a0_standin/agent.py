"""A0 `agent.py` (v1.7), reduced: `AgentContext`, `AgentConfig`, `LoopData`, `Agent`.

What is reproduced: `Agent.__init__` runs the sync `agent_init`
extensions; a message-loop pass runs `message_loop_start`, `message_loop_prompts_before`, then
builds the system prompt (`get_system_prompt`: the `system_prompt` extensions append its parts to a
list, which A0 joins with blank lines into the system message of every LLM call), then
`message_loop_prompts_after` (where `_memory` recalls) with `loop_data=`; a tool call runs
`tool_execute_before`/`tool_execute_after` around `Tool.execute`, with `get_tool` resolving
`tools/<name>.py` through the agent's paths (enabled plugins included, failures -> `Unknown`).
There is no LLM: `call_utility_model` asks `context.utility_model`, a callable a test sets.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from inspect import isawaitable
from typing import Any, ClassVar

from helpers.defer import DeferredTask
from helpers.log import Log

from helpers import extension, files, history, subagents

UtilityModel = Callable[[str, str], "str | Awaitable[str]"]


@dataclass
class AgentConfig:
    mcp_servers: str = ""
    profile: str = ""
    knowledge_subdirs: list[str] = field(default_factory=lambda: ["default", "custom"])
    additional: dict[str, Any] = field(default_factory=dict)


@dataclass
class UserMessage:
    message: str
    attachments: list[str] = field(default_factory=list)
    system_message: list[str] = field(default_factory=list)
    id: str = ""


class LoopData:
    """Per-monologue state handed to loop extensions as `loop_data`."""

    def __init__(self, **kwargs: Any) -> None:
        self.iteration = -1
        self.system: list[str] = []
        self.user_message: history.Message | None = None
        self.history_output: list[history.OutputMessage] = []
        self.extras_temporary: OrderedDict[str, Any] = OrderedDict()
        self.extras_persistent: OrderedDict[str, Any] = OrderedDict()
        self.last_response = ""
        self.params_temporary: dict[str, Any] = {}
        self.params_persistent: dict[str, Any] = {}
        self.current_tool: Any = None
        for key, value in kwargs.items():
            setattr(self, key, value)


class AgentContextType(Enum):
    USER = "user"
    TASK = "task"
    BACKGROUND = "background"


class AgentContext:
    """A chat: its log, data (the active project lives in `data["project"]`) and agent 0."""

    _contexts: ClassVar[dict[str, AgentContext]] = {}
    _contexts_lock: ClassVar[threading.RLock] = threading.RLock()
    _counter: ClassVar[int] = 0

    @extension.extensible
    def __init__(
        self,
        config: AgentConfig,
        id: str | None = None,
        name: str | None = None,
        agent0: Agent | None = None,
        log: Log | None = None,
        paused: bool = False,
        streaming_agent: Agent | None = None,
        created_at: datetime | None = None,
        type: AgentContextType = AgentContextType.USER,
        last_message: datetime | None = None,
        data: dict[str, Any] | None = None,
        output_data: dict[str, Any] | None = None,
        set_current: bool = False,
    ) -> None:
        self.id = id or AgentContext.generate_id()
        with AgentContext._contexts_lock:
            AgentContext._contexts[self.id] = self
            AgentContext._counter += 1
            self.no = AgentContext._counter
        self.name = name
        self.config = config
        self.data: dict[str, Any] = data or {}
        self.output_data: dict[str, Any] = output_data or {}
        self.log = log or Log()
        self.log.context = self
        self.paused = paused
        self.streaming_agent = streaming_agent
        self.task: DeferredTask | None = None
        self.created_at = created_at or datetime.now(UTC)
        self.type = type
        self.last_message = last_message or datetime.now(UTC)
        self.utility_model: UtilityModel | None = None  # stand-in: the "LLM" of this chat
        self.agent0 = agent0 or Agent(0, self.config, self)

    @staticmethod
    def generate_id() -> str:
        return uuid.uuid4().hex[:8]

    @staticmethod
    def get(id: str) -> AgentContext | None:
        with AgentContext._contexts_lock:
            return AgentContext._contexts.get(id)

    @staticmethod
    def all() -> list[AgentContext]:
        with AgentContext._contexts_lock:
            return list(AgentContext._contexts.values())

    @staticmethod
    def remove(id: str) -> AgentContext | None:
        with AgentContext._contexts_lock:
            return AgentContext._contexts.pop(id, None)

    @classmethod
    def reset_registry(cls) -> None:
        """Stand-in: forget every context (test isolation)."""
        with cls._contexts_lock:
            cls._contexts.clear()

    def get_data(self, key: str, recursive: bool = True) -> Any:
        return self.data.get(key)

    def set_data(self, key: str, value: Any, recursive: bool = True) -> None:
        self.data[key] = value

    def get_output_data(self, key: str, recursive: bool = True) -> Any:
        return self.output_data.get(key)

    def set_output_data(self, key: str, value: Any, recursive: bool = True) -> None:
        self.output_data[key] = value

    def get_agent(self) -> Agent:
        return self.streaming_agent or self.agent0

    def run_task(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> DeferredTask:
        """Run a coroutine on the shared "AgentContext" loop thread, as every chat does in A0."""
        self.task = DeferredTask(thread_name=self.__class__.__name__)
        return self.task.start_task(func, *args, **kwargs)


class Agent:
    DATA_NAME_SUPERIOR = "_superior"
    DATA_NAME_SUBORDINATE = "_subordinate"
    DATA_NAME_CTX_WINDOW = "ctx_window"

    @extension.extensible
    def __init__(self, number: int, config: AgentConfig, context: AgentContext | None = None) -> None:
        self.config = config
        self.context = context or AgentContext(config=config, agent0=self)
        self.number = number
        self.agent_name = f"A{self.number}"
        self.history = history.History(self)
        self.last_user_message: history.Message | None = None
        self.intervention: UserMessage | None = None
        self.data: dict[str, Any] = {}
        self.loop_data = LoopData()
        extension.call_extensions_sync("agent_init", self)

    # --- data, prompts, utility model ------------------------------------------------------------

    def get_data(self, field: str) -> Any:
        return self.data.get(field)

    def set_data(self, field: str, value: Any) -> None:
        self.data[field] = value

    @extension.extensible
    def read_prompt(self, file: str, **kwargs: Any) -> str:
        dirs = subagents.get_paths(self, "prompts")
        prompt = files.read_prompt_file(file, _directories=dirs, _agent=self, **kwargs)
        if files.is_full_json_template(prompt):
            prompt = files.remove_code_fences(prompt)
        return prompt

    def parse_prompt(self, _prompt_file: str, **kwargs: Any) -> str:
        dirs = subagents.get_paths(self, "prompts")
        return files.parse_file(_prompt_file, _directories=dirs, _agent=self, **kwargs)

    @extension.extensible
    async def call_utility_model(
        self, system: str, message: str, callback: Any = None, background: bool = False
    ) -> str:
        """Stand-in: `context.utility_model(system, message)` (sync or async), or "" if unset."""
        model = self.context.utility_model
        if model is None:
            return ""
        answer = model(system, message)
        if isawaitable(answer):
            answer = await answer
        return str(answer)

    def concat_messages(self, messages: history.History) -> str:
        return messages.output_text(human_label="user", ai_label="assistant")

    # --- history ---------------------------------------------------------------------------------

    @extension.extensible
    def hist_add_message(
        self, ai: bool, content: history.MessageContent, tokens: int = 0, id: str = ""
    ) -> history.Message:
        content_data = {"content": content}
        extension.call_extensions_sync("hist_add_before", self, content_data=content_data, ai=ai)
        return self.history.add_message(ai, content_data["content"], tokens=tokens, id=id)

    @extension.extensible
    def hist_add_user_message(self, message: UserMessage | str, intervention: bool = False) -> history.Message:
        """Adds A0's user-message template content: `{"user_message": ...}` plus non-empty parts."""
        if isinstance(message, str):
            message = UserMessage(message=message)
        self.history.new_topic()
        content = {
            "system_message": message.system_message,
            "user_message": message.message,
            "attachments": message.attachments,
        }
        content = {k: v for k, v in content.items() if v}
        msg = self.hist_add_message(False, content=content, id=message.id)
        self.last_user_message = msg
        return msg

    @extension.extensible
    def hist_add_ai_response(self, message: str, id: str = "") -> history.Message:
        self.loop_data.last_response = message
        return self.hist_add_message(True, content=message, id=id)

    def hist_add_tool_result(self, tool_name: str, tool_result: str, **kwargs: Any) -> history.Message:
        data = {"tool_name": tool_name, "tool_result": tool_result, **kwargs}
        extension.call_extensions_sync("hist_add_tool_result", self, data=data)
        return self.hist_add_message(False, content=data)

    # --- the loop, split into the steps tests drive ---------------------------------------------------

    async def start_monologue(self) -> LoopData:
        """A new `LoopData` for the last user message, then the `monologue_start` extensions."""
        self.loop_data = LoopData(user_message=self.last_user_message)
        await extension.call_extensions_async("monologue_start", self, loop_data=self.loop_data)
        return self.loop_data

    async def run_message_loop(self, loop_data: LoopData | None = None) -> LoopData:
        """One message-loop iteration up to the main LLM call (recall happens here)."""
        if loop_data is None:
            loop_data = await self.start_monologue()
        self.loop_data = loop_data
        self.context.streaming_agent = self
        loop_data.iteration += 1
        loop_data.params_temporary = {}
        await extension.call_extensions_async("message_loop_start", self, loop_data=loop_data)
        await extension.call_extensions_async("message_loop_prompts_before", self, loop_data=loop_data)
        loop_data.system = await self.get_system_prompt(loop_data)
        loop_data.history_output = self.history.output()
        await extension.call_extensions_async("message_loop_prompts_after", self, loop_data=loop_data)
        loop_data.params_temporary["extras"] = {**loop_data.extras_persistent, **loop_data.extras_temporary}
        loop_data.extras_temporary.clear()
        await extension.call_extensions_async("message_loop_end", self, loop_data=loop_data)
        return loop_data

    @extension.extensible
    async def get_system_prompt(self, loop_data: LoopData) -> list[str]:
        """The system prompt's parts, as the `system_prompt` extensions append them."""
        system_prompt: list[str] = []
        await extension.call_extensions_async("system_prompt", self, system_prompt=system_prompt, loop_data=loop_data)
        return system_prompt

    async def end_monologue(self, loop_data: LoopData | None = None) -> None:
        """The `monologue_end` extensions (memorize starts its Background task here)."""
        await extension.call_extensions_async("monologue_end", self, loop_data=loop_data or self.loop_data)

    # --- tools -----------------------------------------------------------------------------------

    @extension.extensible
    def get_tool(
        self,
        name: str,
        method: str | None,
        args: dict[str, Any],
        message: str,
        loop_data: LoopData | None,
        **kwargs: Any,
    ) -> Any:
        """First `tools/<name>.py` along the agent's paths that loads; otherwise `Unknown`."""
        from helpers.modules import load_classes_from_file
        from helpers.tool import Tool
        from tools.unknown import Unknown

        classes: list[type[Tool]] = []
        for path in subagents.get_paths(self, "tools", name + ".py"):
            try:
                classes = load_classes_from_file(path, Tool)
                break
            except Exception:
                continue
        tool_class = classes[0] if classes else Unknown
        return tool_class(
            agent=self, name=name, method=method, args=args, message=message, loop_data=loop_data, **kwargs
        )

    async def call_tool(
        self, name: str, args: dict[str, Any] | None = None, *, method: str | None = None, message: str = ""
    ) -> Any:
        """What `process_tools` does with one parsed tool request; returns the tool's `Response`."""
        tool_args = args if args is not None else {}
        tool = self.get_tool(name=name, method=method, args=tool_args, message=message, loop_data=self.loop_data)
        self.loop_data.current_tool = tool
        try:
            await tool.before_execution(**tool_args)
            await extension.call_extensions_async(
                "tool_execute_before", self, tool_args=tool_args or {}, tool_name=name
            )
            response = await tool.execute(**tool_args)
            await extension.call_extensions_async("tool_execute_after", self, response=response, tool_name=name)
            await tool.after_execution(response)
            return response
        finally:
            self.loop_data.current_tool = None
