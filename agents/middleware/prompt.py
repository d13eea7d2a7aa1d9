"""RunPromptMiddleware: the system prompt computed for this run (memory, skills, options)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import SystemMessage


class RunPromptMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        context = request.runtime.context if request.runtime is not None else None
        prompt = getattr(context, "system_prompt", "")
        if prompt:
            request = request.override(system_message=SystemMessage(prompt))
        return await handler(request)
