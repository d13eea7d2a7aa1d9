"""Deferred tools: many MCP tools without their schemas in every model call (`tool_search.enabled`).

The model is bound to `tool_search` and told only the deferred tools' names.
`tool_search(query)` returns the best matches with their descriptions and
arguments, and records their names in the thread's state (`found_tools`):
from the next model call on they are bound like any other tool. Kept in the
checkpointed state, the finds survive a resumed run and hold in every runner
process. A tool the run does not offer (the person's role: `RunContext.tool_allowed`) is neither
named nor found.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.tools import ToolRuntime
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from agents.tools.decorator import tool
from bus.content import text_of


def _matches(query: str, tools: Sequence[BaseTool], limit: int) -> list[BaseTool]:
    words = [w for w in query.lower().replace("_", " ").split() if w]
    scored = []
    for position, candidate in enumerate(tools):
        text = f"{candidate.name.replace('_', ' ')} {candidate.description}".lower()
        score = sum(text.count(w) for w in words) + (5 if candidate.name.lower() in query.lower() else 0)
        if score:
            scored.append((-score, position, candidate))
    return [c for _, _, c in sorted(scored)[:limit]]


def _offered(context: Any) -> Callable[[str], bool]:
    """Whether the run offers a tool (by name): the run context's rule, else every tool."""
    allowed = getattr(context, "tool_allowed", None)
    return allowed if callable(allowed) else (lambda _: True)


def make_tool_search(deferred: Sequence[BaseTool], limit: int = 5) -> BaseTool:
    @tool("tool_search")
    async def tool_search(query: str, runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """Find tools you can use for a task, by keywords or a tool's name. The tools found can be
        called from your next step on."""
        offered = _offered(runtime.context)
        found = _matches(query, [t for t in deferred if offered(t.name)], limit)
        if not found:
            text = f"No tool matches {query!r}. Try other words; the tools are listed in your instructions."
        else:
            text = "\n\n".join(
                f"{t.name}: {t.description}\narguments: {json.dumps(t.args, ensure_ascii=False)}"
                for t in found
            )
        message = ToolMessage(text, tool_call_id=runtime.tool_call_id or "", name="tool_search")
        return Command(update={"found_tools": [t.name for t in found], "messages": [message]})

    return tool_search


class DeferredToolsMiddleware(AgentMiddleware):
    """Bind only the deferred tools this thread has found; name the rest in the system message."""

    def __init__(self, deferred: Sequence[BaseTool]) -> None:
        super().__init__()
        self.deferred = {t.name for t in deferred}

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        found = set(cast(list[str], request.state.get("found_tools") or []))
        tools = [t for t in request.tools if getattr(t, "name", None) not in self.deferred - found]
        offered = _offered(getattr(request.runtime, "context", None))
        listing = ", ".join(sorted(n for n in self.deferred if offered(n)))
        if not listing:
            return await handler(request.override(tools=tools))
        note = (
            f"<deferred_tools>\nMore tools are available: {listing}. Call tool_search to get one "
            "(by name or by what it does) before you use it.\n</deferred_tools>"
        )
        current = text_of(request.system_message.content, sep="") if request.system_message else ""
        system = SystemMessage(f"{current}\n\n{note}" if current else note)
        return await handler(request.override(tools=tools, system_message=system))
