"""DanglingToolCallMiddleware: answer tool calls that never got a result (an interrupted run).

Providers refuse a conversation in which an assistant tool call has no tool
result. After a cancel or crash mid-tool, the thread has exactly that; this
adds placeholder results to the request (the stored history is left as is).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

PLACEHOLDER = "[This tool call was interrupted before it returned a result.]"


def repair(messages: list[AnyMessage]) -> list[AnyMessage]:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    if not any(isinstance(m, AIMessage) and m.tool_calls for m in messages):
        return messages
    # Placeholders go right after their assistant message: results must follow their call.
    repaired: list[AnyMessage] = []
    for message in messages:
        repaired.append(message)
        if isinstance(message, AIMessage):
            ids = [cast(str, c["id"]) for c in message.tool_calls if c.get("id")]
            ids += [
                cast(str, c.get("id"))
                for c in message.additional_kwargs.get("tool_calls", [])
                if isinstance(c, dict) and c.get("id") and c.get("id") not in ids
            ]
            for call_id in ids:
                if call_id not in answered:
                    repaired.append(ToolMessage(PLACEHOLDER, tool_call_id=call_id, status="error"))
                    answered.add(call_id)
    return repaired


class DanglingToolCallMiddleware(AgentMiddleware):
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        fixed = repair(list(request.messages))
        if len(fixed) != len(request.messages):
            request = request.override(messages=fixed)
        return await handler(request)
