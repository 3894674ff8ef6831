"""A0 `helpers/tool.py`: `Tool` base and `Response(message, break_loop, additional=None)`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.extension import call_extensions_async

if TYPE_CHECKING:
    from agent import Agent, LoopData

    from helpers.log import LogItem


@dataclass
class Response:
    message: str
    break_loop: bool
    additional: dict[str, Any] | None = None


class Tool:
    """Constructed by `Agent.get_tool` as `cls(agent=, name=, method=, args=, message=, loop_data=)`."""

    def __init__(
        self,
        agent: Agent,
        name: str,
        method: str | None,
        args: dict[str, Any],
        message: str,
        loop_data: LoopData | None,
        **kwargs: Any,
    ) -> None:
        self.agent = agent
        self.name = name
        self.method = method
        self.args = args
        self.loop_data = loop_data
        self.message = message
        self.progress = ""

    async def execute(self, **kwargs: Any) -> Response:
        raise NotImplementedError

    async def set_progress(self, content: str | None) -> None:
        ctx = {"content": content or ""}
        await call_extensions_async("tool_output_update", self.agent, ctx=ctx)
        self.progress = ctx["content"]

    async def before_execution(self, **kwargs: Any) -> None:
        self.log = self.get_log_object()

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        text = response.message.strip()
        self.agent.hist_add_tool_result(self.name, text, id=self.log.id or "", **(response.additional or {}))
        self.log.update(content=text)

    def get_log_object(self) -> LogItem:
        label = f"{self.name}:{self.method}" if self.method else self.name
        heading = f"icon://construction {self.agent.agent_name}: Using tool '{label}'"
        return self.agent.context.log.log(
            type="tool", heading=heading, content="", kvps=self.args, _tool_name=self.name, id=str(uuid.uuid4())
        )
