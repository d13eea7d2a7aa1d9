"""ToolAuditMiddleware: calls of the tools `access.audited_tools` names (and every call a guardrail
refused) as records in the audit trail (`tool_call`, `tool_refused`): who, which run and thread, which
tool, a digest of its arguments (never the arguments themselves) and the outcome.

It is the outermost tool link, outside the run's tool filter (`RunPromptMiddleware`: a call of a tool
the person's role lacks is a `tool_refused` record), the guardrails and `ToolErrorMiddleware`, so it
sees the outcome the model gets. Writing a record never fails a call (access.audit logs a failure).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from access.audit import AuditLog, digest
from bus import Bus
from config import AppConfig


class ToolAuditMiddleware(AgentMiddleware):
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        super().__init__()
        self.audit = AuditLog(bus)
        self.audited = set(config.access.audited_tools)

    def _audited(self, name: str, group: str | None) -> bool:
        return (
            "*" in self.audited
            or name in self.audited
            or (group is not None and f"group:{group}" in self.audited)
        )

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        call = request.tool_call
        name = str(call.get("name") or "unknown")
        context = getattr(request.runtime, "context", None) if request.runtime is not None else None
        groups = getattr(context, "tool_group_of", None) or {}
        outcome = "error"
        refused: str | None = None
        try:
            result = await handler(request)
            if isinstance(result, ToolMessage):
                refused = result.response_metadata.get("refused") if result.response_metadata else None
                outcome = "refused" if refused else ("error" if result.status == "error" else "ok")
            else:
                outcome = "ok"
            return result
        except Exception as exc:
            if any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__):
                outcome = "ok"  # a clarification or interrupt: LangGraph's control flow
            raise
        finally:
            if refused or self._audited(name, groups.get(name)):
                detail: dict[str, Any] = {"tool": name, "args": digest(call.get("args") or {})}
                if group := groups.get(name):
                    detail["group"] = group
                if refused:
                    detail["reason"] = refused
                await self.audit.record(
                    "tool_refused" if refused else "tool_call",
                    user_id=getattr(context, "user_id", None),
                    run_id=getattr(context, "run_id", None),
                    thread_id=getattr(context, "thread_id", None),
                    outcome=outcome,
                    detail=detail,
                )
