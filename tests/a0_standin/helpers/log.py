"""A0 `helpers/log.py`: the per-context log the UI shows (recall logs a `util` item per recall).

`Log.log(type, heading=None, content=None, kvps=None, update_progress=None, id=None, **kwargs)`
appends a `LogItem`; `LogItem.update(...)`/`stream(...)` change it, extra keyword arguments landing
in `kvps` as in A0. Items stay in `Log.logs` so tests can read what a plugin logged. Secret masking,
truncation and UI notifications are left out.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agent import AgentContext

Type = Literal[
    "agent",
    "browser",
    "code_exe",
    "subagent",
    "error",
    "hint",
    "info",
    "progress",
    "response",
    "tool",
    "mcp",
    "input",
    "user",
    "util",
    "warning",
]
ProgressUpdate = Literal["persistent", "temporary", "none"]


@dataclass
class LogItem:
    log: Log
    no: int
    type: str
    heading: str = ""
    content: str = ""
    update_progress: ProgressUpdate | None = "persistent"
    kvps: OrderedDict[str, Any] | None = None
    id: str | None = None
    guid: str = ""
    timestamp: float = 0.0
    agentno: int = 0

    def __post_init__(self) -> None:
        self.guid = self.log.guid
        self.timestamp = self.timestamp or time.time()

    def update(
        self,
        type: str | None = None,
        heading: str | None = None,
        content: str | None = None,
        kvps: dict[str, Any] | None = None,
        update_progress: ProgressUpdate | None = None,
        **kwargs: Any,
    ) -> None:
        """Change fields; extra keyword arguments are merged into `kvps`. Ignored after a log reset."""
        if self.guid == self.log.guid:
            self.log._update_item(
                self.no,
                type=type,
                heading=heading,
                content=content,
                kvps=kvps,
                update_progress=update_progress,
                **kwargs,
            )

    def stream(self, heading: str | None = None, content: str | None = None, **kwargs: Any) -> None:
        """Append text to heading, content or kvps values."""
        if heading is not None:
            self.update(heading=self.heading + heading)
        if content is not None:
            self.update(content=self.content + content)
        for key, value in kwargs.items():
            previous = self.kvps.get(key, "") if self.kvps else ""
            self.update(**{key: previous + value})

    def output(self) -> dict[str, Any]:
        return {
            "no": self.no,
            "id": self.id,
            "type": self.type,
            "heading": self.heading,
            "content": self.content,
            "kvps": self.kvps,
            "timestamp": self.timestamp,
            "agentno": self.agentno,
        }


class Log:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.context: AgentContext | None = None
        self.guid: str = str(uuid.uuid4())
        self.updates: list[int] = []
        self.logs: list[LogItem] = []
        self.progress: str = ""
        self.progress_no: int = 0
        self.progress_active: bool = False

    def log(
        self,
        type: str,
        heading: str | None = None,
        content: str | None = None,
        kvps: dict[str, Any] | None = None,
        update_progress: ProgressUpdate | None = None,
        id: str | None = None,
        **kwargs: Any,
    ) -> LogItem:
        """Append an item; `agentno` is the context's streaming agent, as in A0."""
        with self._lock:
            agentno = 0
            if self.context is not None and self.context.streaming_agent is not None:
                agentno = self.context.streaming_agent.number
            item = LogItem(log=self, no=len(self.logs), type=type, agentno=agentno)
            self.logs.append(item)
        self._update_item(
            item.no,
            type=type,
            heading=heading,
            content=content,
            kvps=kvps,
            update_progress=update_progress,
            id=id,
            **kwargs,
        )
        return item

    def _update_item(
        self,
        no: int,
        type: str | None = None,
        heading: str | None = None,
        content: str | None = None,
        kvps: dict[str, Any] | None = None,
        update_progress: ProgressUpdate | None = None,
        id: str | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            item = self.logs[no]
            if id is not None:
                item.id = id
            if type is not None:
                item.type = type
            if update_progress is not None:
                item.update_progress = update_progress
            if heading is not None:
                item.heading = str(heading)
            if content is not None:
                item.content = str(content)
            if kvps is not None:
                item.kvps = OrderedDict(copy.deepcopy(kvps))
            elif item.kvps is None:
                item.kvps = OrderedDict()
            if kwargs:
                item.kvps.update(copy.deepcopy(kwargs))
            self.updates.append(item.no)
            if item.heading and item.update_progress != "none" and item.no >= self.progress_no:
                self.progress = item.heading
                self.progress_no = item.no if item.update_progress == "persistent" else -1
                self.progress_active = True

    def set_progress(self, progress: str, no: int = 0, active: bool = True) -> None:
        with self._lock:
            self.progress = progress
            self.progress_no = no or len(self.logs)
            self.progress_active = active

    def reset(self) -> None:
        """New guid, no items: updates through old `LogItem`s are then ignored (A0 behaviour)."""
        with self._lock:
            self.guid = str(uuid.uuid4())
            self.updates = []
            self.logs = []

    def output(self, start: int | None = None, end: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [item.output() for item in self.logs[start:end]]

    def find(self, type: str | None = None, heading_contains: str = "") -> list[LogItem]:
        """Stand-in helper for tests: items of a type whose heading contains the text."""
        with self._lock:
            return [
                item for item in self.logs if (type is None or item.type == type) and heading_contains in item.heading
            ]
