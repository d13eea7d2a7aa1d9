"""UntrustedContentMiddleware: what comes from outside the owner reaches the model fenced and cleaned.

Innermost around the model call, it rewrites the request only (the thread's state, the UI and the
history keep what the tools and people actually said):

- every tool result (web fetch and search, files and converted uploads read back, MCP tools, the
  browser, command output, subagents) is put between the boundary tags of `_untrusted_text.fence`,
  with control characters and invisible Unicode stripped, look-alikes of our prompt's sections
  escaped and its size bounded;
- a message from a member of a group chat (the router marks it with `SENDER_KEY` in the message's
  `additional_kwargs`) is fenced the same way, its display name shown as a quoted label;
- what a background task brought back (a command's output, a subagent's answer), inside the hidden
  message that reports it (marked `REPORT_KEY`), is fenced the same way;
- the owner's own messages keep their words but lose invisible characters and forged section tags
  (as DeerFlow's InputSanitizationMiddleware does);
- once the request holds fenced content, the system prompt gets `BOUNDARY_PROMPT`, which tells the
  model what the fence means.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agents.graph.middleware._untrusted_text import BOUNDARY_PROMPT, BOUNDARY_TAG, clean, fence, is_fenced

log = logging.getLogger(__name__)

# The router (channels/router/inbound.py) puts {"chat_type": "group", "name": ..., "user_id": ...}
# here for a message from a group chat; the key is the wire contract between the two.
SENDER_KEY = "antler_sender"
MAX_MEMBER_MESSAGE_CHARS = 16_000
# agents.subagents.background marks the hidden message that reports a background task's outcome.
REPORT_KEY = "background_task"

# Tools whose results are Antler's own structured answers (JSON or a confirmation): cleaned like the
# rest (names they list lose invisible characters and forged tags) but not fenced, so they stay the
# JSON the model and the UI expect. Every other tool's result is fenced.
OWN_TOOLS = frozenset(
    {
        "ask_clarification",
        "list_uploaded_files",
        "present_files",
        "setup_agent",
        "tool_search",
        "update_agent",
        "view_image",
        "write_todos",
    }
)


def _tool_names(messages: list[AnyMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    names[str(call["id"])] = str(call.get("name") or "tool")
    return names


def _rewrite_text(content: Any, change: Callable[[str], str]) -> Any:
    """`content` (a string or content blocks) with every text part changed; images left as they are."""
    if isinstance(content, str):
        return change(content)
    if isinstance(content, list):
        rebuilt: list[Any] = []
        for block in content:
            if isinstance(block, str):
                rebuilt.append(change(block))
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block["text"], str):
                rebuilt.append({**block, "text": change(block["text"])})
            else:
                rebuilt.append(block)
        return rebuilt
    return content


def _tool_result(message: ToolMessage, source: str) -> ToolMessage:
    def change(text: str) -> str:
        if source in OWN_TOOLS:
            return clean(text)
        return text if is_fenced(text) else fence(text, f"tool {source}")

    content = _rewrite_text(message.content, change)
    return message if content == message.content else message.model_copy(update={"content": content})


def _background_report(text: str) -> str:
    """A background task's report (`agents.subagents.background`): its framing is ours, what the
    task brought back (a command's output, a subagent's answer from the web) is fenced."""
    opening = text.find("<background_task_result")
    start = text.find(">", opening) + 1 if opening >= 0 else 0
    end = text.rfind("</background_task_result>")  # ours is the last: the task's text comes before
    if opening < 0 or end < start:
        return clean(text, max_chars=None)
    inside = fence(text[start:end].strip("\n"), "background task result")
    return f"{clean(text[:start], max_chars=None)}\n{inside}\n{clean(text[end:], max_chars=None)}"


def _human(message: HumanMessage) -> HumanMessage:
    sender = message.additional_kwargs.get(SENDER_KEY)
    if message.additional_kwargs.get(REPORT_KEY):

        def change(text: str) -> str:
            return text if is_fenced(text) else _background_report(text)

    elif isinstance(sender, dict) and sender.get("chat_type") == "group":
        name = str(sender.get("name") or sender.get("user_id") or "unknown member")

        def change(text: str) -> str:
            return fence(text, "group chat member", sender=name, max_chars=MAX_MEMBER_MESSAGE_CHARS)

    else:

        def change(text: str) -> str:
            return clean(text, max_chars=None)  # the owner's own words are not cut

    content = _rewrite_text(message.content, change)
    return message if content == message.content else message.model_copy(update={"content": content})


def contain(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The messages as the model should read them (see the module's docstring)."""
    names = _tool_names(messages)
    contained: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            source = message.name or names.get(message.tool_call_id) or "tool"
            contained.append(_tool_result(message, source))
        elif isinstance(message, HumanMessage):
            contained.append(_human(message))
        else:
            contained.append(message)
    return contained


def _with_policy(system: SystemMessage | None) -> SystemMessage:
    if system is None:
        return SystemMessage(BOUNDARY_PROMPT)
    if isinstance(system.content, str):
        if BOUNDARY_PROMPT in system.content:
            return system
        return SystemMessage(f"{system.content}\n\n{BOUNDARY_PROMPT}".lstrip())
    return SystemMessage([*system.content, {"type": "text", "text": BOUNDARY_PROMPT}])


def _fences_something(messages: list[AnyMessage]) -> bool:
    opening = f"<{BOUNDARY_TAG} id="
    return any(isinstance(m, ToolMessage | HumanMessage) and opening in str(m.content) for m in messages)


class UntrustedContentMiddleware(AgentMiddleware):
    def _contained(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        messages = contain(list(request.messages))
        if not _fences_something(messages):  # the policy comes with the first fenced content
            return request.override(messages=messages)
        return request.override(messages=messages, system_message=_with_policy(request.system_message))

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]) -> Any:
        return handler(self._contained(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        return await handler(self._contained(request))
