"""RunPromptMiddleware: this run's system prompt (memory, skills, soul) and the tools it may use.

The compiled agent knows every tool; a run narrows them through its RunContext: an active
skill's `allowed-tools`, a custom agent's tool groups, `setup_agent` only in a bootstrap run and
`update_agent` only for a custom agent. The model is offered only those, and a call of any other
(a model may still name one it saw earlier) gets an error back instead of running.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import SystemMessage, ToolMessage


def _name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("name") or (tool.get("function") or {}).get("name") or "")
    return str(getattr(tool, "name", ""))


class RunPromptMiddleware(AgentMiddleware):
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        context = request.runtime.context if request.runtime is not None else None
        prompt = getattr(context, "system_prompt", "")
        changes: dict[str, Any] = {}
        if prompt:
            changes["system_message"] = SystemMessage(prompt)
        allowed = getattr(context, "tool_allowed", None)
        if allowed is not None:
            tools = [t for t in request.tools if allowed(_name(t))]
            if len(tools) != len(request.tools):
                changes["tools"] = tools
        if changes:
            request = request.override(**changes)
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        context = getattr(request.runtime, "context", None)
        allowed = getattr(context, "tool_allowed", None)
        name = str(request.tool_call.get("name", ""))
        if allowed is not None and not allowed(name):
            return ToolMessage(
                content=f"Error: the tool {name} is not available in this run; use one of the tools offered.",
                tool_call_id=request.tool_call.get("id") or "",
                name=name,
                status="error",
                response_metadata={"refused": "not offered in this run (the person's role, agent or skill)"},
            )
        return await handler(request)
