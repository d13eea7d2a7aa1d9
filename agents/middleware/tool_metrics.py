"""ToolMetricsMiddleware: each tool call counted by tool and outcome, and timed (`bus.metrics`).

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

from bus.metrics import TOOL_CALLS, TOOL_DURATION


class ToolMetricsMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        name = str(request.tool_call.get("name") or "unknown")
        started = time.monotonic()
        outcome = "error"
        try:
            result = await handler(request)
            outcome = "error" if isinstance(result, ToolMessage) and result.status == "error" else "ok"
            return result
        except Exception as exc:
            if any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__):
                outcome = "ok"
            raise
        finally:
            TOOL_CALLS.labels(name, outcome).inc()
            TOOL_DURATION.labels(name).observe(time.monotonic() - started)
