"""A0 `helpers/history.py`, reduced: messages and `output_text()` as recall's query uses them.

A user message's content is the dict of A0's JSON template (`{"user_message": ...}`), so its text
form is `user: {"user_message": "..."}` as in A0.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, TypedDict

MessageContent = Any


class OutputMessage(TypedDict):
    ai: bool
    content: MessageContent


def _stringify_content(content: MessageContent) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def output_text(messages: list[OutputMessage], ai_label: str = "ai", human_label: str = "human") -> str:
    return "\n".join(f"{ai_label if m['ai'] else human_label}: {_stringify_content(m['content'])}" for m in messages)


class Message:
    def __init__(self, ai: bool, content: MessageContent, tokens: int = 0, id: str = "") -> None:
        self.id = id or str(uuid.uuid4())
        self.ai = ai
        self.content = content
        self.summary = ""
        self.tokens = tokens

    def output(self) -> list[OutputMessage]:
        return [OutputMessage(ai=self.ai, content=self.summary or self.content)]

    def output_text(self, human_label: str = "user", ai_label: str = "ai") -> str:
        return output_text(self.output(), ai_label, human_label)


class History:
    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.messages: list[Message] = []

    def add_message(self, ai: bool, content: MessageContent, tokens: int = 0, id: str = "") -> Message:
        msg = Message(ai, content, tokens=tokens, id=id)
        self.messages.append(msg)
        return msg

    def new_topic(self) -> None:
        return None

    def output(self) -> list[OutputMessage]:
        return [out for msg in self.messages for out in msg.output()]

    def output_text(self, human_label: str = "user", ai_label: str = "ai") -> str:
        return output_text(self.output(), ai_label, human_label)
