"""ToolTelemetryMiddleware: each tool call counted by tool and outcome, timed (`bus.metrics`), and,
with tracing on, an `execute_tool` span (`bus.tracing`) that the sandbox's or a subagent's work
continues under.

It sits just outside `ToolErrorMiddleware`, so a tool that raised is seen as the error message the
model gets (`status="error"`), the same outcome a tool that answered with an error has.
LangGraph's control flow (an interrupt, a clarification, a `Command`) is no failure: counted `ok`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from bus import tracing
from bus.metrics import TOOL_CALLS, TOOL_DURATION, labelled


class ToolTelemetryMiddleware(AgentMiddleware):
    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        call = request.tool_call
        name = str(call.get("name") or "unknown")
        started = time.monotonic()
        outcome = "error"
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.get("id"),
            "gen_ai.tool.type": "function",
        }
        try:
            with tracing.span(f"execute_tool {name}", attributes) as span:
                result = await handler(request)
                outcome = "error" if isinstance(result, ToolMessage) and result.status == "error" else "ok"
                if span is not None and outcome == "error":
                    span.set_attribute("error.type", "tool_error")
            return result
        except Exception as exc:
            if any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__):
                outcome = "ok"
            raise
        finally:
            labelled(TOOL_CALLS, name, outcome).inc()
            labelled(TOOL_DURATION, name).observe(time.monotonic() - started)
