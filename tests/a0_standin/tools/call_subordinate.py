"""A0 `tools/call_subordinate.py` (v1.7): the superior hands a message to a subordinate agent.

As in A0: the first call (or `reset="true"`) builds the subordinate from `initialize_agent()` with the
`profile` (or `agent_profile`) argument as its `config.profile`, as `Agent(number + 1, config,
same context)`, and links superior and subordinate in their data. Stand-in reduction (no LLM): the
subordinate's monologue is one message-loop pass, where its recall runs with its own profile's
settings, and its answer is the memories text that recall put into its prompt.
"""

from __future__ import annotations

from typing import Any

from agent import Agent, UserMessage
from helpers.tool import Response, Tool
from initialize import initialize_agent


class Delegation(Tool):
    async def execute(self, message: str = "", reset: str = "", **kwargs: Any) -> Response:
        if self.agent.get_data(Agent.DATA_NAME_SUBORDINATE) is None or str(reset).lower().strip() == "true":
            config = initialize_agent()
            agent_profile = kwargs.get("profile", kwargs.get("agent_profile", ""))
            if agent_profile:
                config.profile = agent_profile
            sub = Agent(self.agent.number + 1, config, self.agent.context)
            sub.set_data(Agent.DATA_NAME_SUPERIOR, self.agent)
            self.agent.set_data(Agent.DATA_NAME_SUBORDINATE, sub)
        subordinate: Agent = self.agent.get_data(Agent.DATA_NAME_SUBORDINATE)
        subordinate.hist_add_user_message(UserMessage(message=message, attachments=[]))
        loop_data = await subordinate.run_message_loop()
        await subordinate.end_monologue(loop_data)
        subordinate.history.new_topic()
        return Response(message=str(loop_data.extras_persistent.get("memories", "")), break_loop=False)
