"""ReadBeforeWriteMiddleware: the agent changes an existing file only after reading it, as DeerFlow's does.

`write_file` or `str_replace` on a file that already exists is refused, with a
hint to read it first, unless the conversation holds a `read_file` of that path
newer than the agent's last edit or append to it (a write_file of the whole file
counts as knowing it: the agent wrote every byte). A write blindly appending to
a report it never looked at is how the same section ends up in a file five times.

The gate keeps no state of its own: a successful `read_file` result carries a
mark (`additional_kwargs["antler_read"]`, the normalised path), and the agent's
own changes are its successful write tool calls, both in `state["messages"]`.
So the rule holds per thread, across runs and runners, and a summarised-away
read no longer counts (the model no longer sees it either). After an edit or an
append the file needs a fresh read; of two changes to one path in one model
turn only the first runs.
Creating a new file needs no read. When the sandbox cannot say whether the file
exists the write goes ahead (the tool reports its own error): the gate never
blocks on its own failure. Changes made by `bash` are not seen.
"""

from __future__ import annotations

import posixpath
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from agents.graph.middleware._util import ToolHandler, ToolResult
from agents.tools.thread_files import ThreadFiles

READ_MARK = "antler_read"
WRITES = frozenset({"write_file", "str_replace"})
READS = frozenset({"read_file"})


def _path(call: Any) -> str | None:
    args = call.get("args") if isinstance(call, dict) else None
    path = args.get("path") if isinstance(args, dict) else None
    return posixpath.normpath(path) if isinstance(path, str) and path.startswith("/") else None


def _whole(call: Any) -> bool:
    """A write_file that replaces the whole file: the agent then knows every byte of it."""
    return bool(call["name"] == "write_file" and not (call.get("args") or {}).get("append"))


def read_since_last_change(messages: list[Any], path: str) -> bool:
    """Whether the agent knows `path` as it is now: its newest read of it, or a whole-file write of it,
    is newer than its last other change to it (an edit or an append)."""
    changes: dict[str | None, bool] = {}  # ids of calls that change `path` -> whether they wrote it whole
    known = False  # no read yet
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] in WRITES and _path(call) == path:
                    changes[call["id"]] = _whole(call)
        elif isinstance(message, ToolMessage):
            if message.additional_kwargs.get(READ_MARK) == path:
                known = True
            elif message.tool_call_id in changes and message.status != "error":
                known = changes[message.tool_call_id]
    return known


def earlier_in_turn(messages: list[Any], call_id: str | None, path: str) -> bool:
    """Whether the model turn making `call_id` changes `path` in an earlier call too."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            for call in message.tool_calls:
                if call["id"] == call_id:
                    return False
                if call["name"] in WRITES and _path(call) == path:
                    return True
    return False


class ReadBeforeWriteMiddleware(AgentMiddleware):
    def __init__(self, files: ThreadFiles) -> None:
        super().__init__()
        self.files = files

    async def awrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        call = request.tool_call
        path = _path(call)
        if path is None or call["name"] not in WRITES | READS:
            return await handler(request)
        if call["name"] in READS:
            result = await handler(request)
            if isinstance(result, ToolMessage) and result.status != "error":
                result.additional_kwargs[READ_MARK] = path
            return result
        messages = list((request.state or {}).get("messages") or [])
        if earlier_in_turn(messages, call["id"], path):
            return self._refused(call, f"{path} is changed by an earlier call of this turn")
        if read_since_last_change(messages, path):
            return await handler(request)
        context = request.runtime.context if request.runtime is not None else None
        user_id, thread_id = getattr(context, "user_id", "default"), getattr(context, "thread_id", "")
        if await self.files.exists(user_id, thread_id, path) is not True:
            return await handler(request)  # a new file (or the tool will say what is wrong)
        return self._refused(call, f"{path} already exists and you have not read its current version")

    @staticmethod
    def _refused(call: Any, why: str) -> ToolMessage:
        return ToolMessage(
            f"Error: {call['name']} was not run: {why}. Call read_file on it (a range of lines is enough, "
            "e.g. the end before appending), check what is there, then try again. After an edit or an "
            "append, read it again before the next change.",
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
        )
