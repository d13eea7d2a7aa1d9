"""ToolOutputBudgetMiddleware: no tool result reaches the model longer than its budget.

One mechanism for every tool (sandbox, MCP, web, config tools, subagents): it
wraps the tool call, and a result longer than `tool_output.max_chars` (or the
tool's override) is replaced by its head and tail around a note. The whole text
is saved first as a file under the thread's outputs (`save`, through the
sandbox broker: agents.tools.thread_files), and the note names that file, so the model can read the parts
it needs with `read_file` (line ranges) or `grep`. If saving fails the note says
so and the result is still cut: one huge result must never fill the context.

Tools in `not_saved` (read_file: its text already is a file) are cut, not saved.
Multimodal results (images) are left alone; text blocks of a list are joined.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from agents.graph.middleware._util import ToolHandler, ToolResult
from agents.tools.thread_files import ThreadFiles
from config import ToolOutputConfig

log = logging.getLogger(__name__)


def text_of_result(content: Any) -> str | None:
    """A tool message's content as one text, or None when it holds more than text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                return None
        return "\n".join(parts)
    return None


def _cut_at_line(text: str, end: int) -> int:
    """`end`, or the end of the last whole line before it when one is in its second half."""
    if end >= len(text):
        return len(text)
    newline = text.rfind("\n", end // 2, end)
    return newline + 1 if newline >= 0 else end


def _start_at_line(text: str, start: int) -> int:
    """`start`, or the start of the next whole line when one begins in the first half after it."""
    if start <= 0:
        return 0
    newline = text.find("\n", start, start + (len(text) - start) // 2)
    return newline + 1 if newline >= 0 else start


def cut(text: str, head_chars: int, tail_chars: int, note: str) -> str:
    """Head and tail of `text` around `note`, at line ends where they are near."""
    head_end = _cut_at_line(text, head_chars)
    tail_start = max(head_end, _start_at_line(text, len(text) - tail_chars)) if tail_chars else len(text)
    return f"{text[:head_end]}\n\n[{note}]\n\n{text[tail_start:]}".rstrip("\n")


class ToolOutputBudgetMiddleware(AgentMiddleware):
    def __init__(self, config: ToolOutputConfig, files: ThreadFiles | None) -> None:
        super().__init__()
        self.config = config
        self.files = files

    def limit(self, tool_name: str) -> int:
        return self.config.tool_overrides.get(tool_name, self.config.max_chars)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        result = await handler(request)
        name = request.tool_call.get("name") or "tool"
        context = request.runtime.context if request.runtime is not None else None
        where = (getattr(context, "user_id", "default"), getattr(context, "thread_id", ""))
        if isinstance(result, ToolMessage):
            return await self._budget(result, name, *where)
        update = result.update if isinstance(result.update, dict) else None
        if update and isinstance(update.get("messages"), list):
            messages = [
                await self._budget(m, name, *where) if isinstance(m, ToolMessage) else m
                for m in update["messages"]
            ]
            return dataclasses.replace(result, update={**update, "messages": messages})
        return result

    async def _budget(self, message: ToolMessage, name: str, user_id: str, thread_id: str) -> ToolMessage:
        limit = self.limit(message.name or name)
        text = text_of_result(message.content)
        if text is None or len(text) <= limit:
            return message
        head = min(self.config.head_chars, limit)
        tail = min(self.config.tail_chars, max(0, limit - head))
        size = f"{len(text):,} characters"
        tool = message.name or name
        if tool in self.config.not_saved or self.files is None:
            note = (
                f"... the result was {size}, over the {limit:,}-character budget; the middle was cut. "
                "Ask for a smaller part (for read_file: start_line and end_line)."
            )
        else:
            try:
                path = await self.files.save_output(user_id, thread_id, tool, text)
            except Exception as exc:  # cut anyway: the context must not fill up
                log.warning("thread %s: could not save the %s output of %s: %s", thread_id, size, tool, exc)
                note = (
                    f"... the result was {size}, over the {limit:,}-character budget; the middle was "
                    f"cut and could not be saved ({exc}). Narrow the request to see the rest."
                )
            else:
                log.info("thread %s: %s output of %s saved to %s", thread_id, size, tool, path)
                note = (
                    f"... the result was {size}, over the {limit:,}-character budget: only its start "
                    f"and end are shown. The whole output is saved at {path}: read parts of it with "
                    "read_file (start_line, end_line) or search it with grep."
                )
        return message.model_copy(update={"content": cut(text, head, tail, note)})
