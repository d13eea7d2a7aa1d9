"""Tool-call approvals: a call the `approvals` rules mark "ask" waits for a person's yes.

    approvals:
      enabled: true
      timeout_seconds: 3600
      rules:                      # the first rule whose tools match decides: run, ask or refuse
        - tools: [bash]
          action: ask
          unless_command: ['ls\\b']   # bash commands matching one (from the start) run unasked
        - tools: ["mcp:github", "write_*"]
          action: ask

"Ask" is a LangGraph `interrupt` inside the tool call: the run ends with the request in its
checkpoint and no runner holds anything while the person decides. The answer is a new run on the
thread with `command: {"resume": ...}` (the LangGraph SDK's `Command(resume=...)`, the chat's
`/approve <id>` and `/deny <id> [reason]`); the tool call then runs, or the model reads that it was
denied and why. The request's value (`approval_request`) carries an `approval_id` derived from the
thread and the tool call, so every answer names the same request however often it is shown.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command, interrupt

from agents.graph.middleware._util import ToolHandler, ToolResult
from config import ApprovalRule, ApprovalsConfig

log = logging.getLogger(__name__)

APPROVAL = "approval_request"  # the interrupt value's `type`
APPROVE_WORDS = frozenset({"approve", "approved", "accept", "yes", "y", "ok", "allow", "true", "always"})


@dataclass(frozen=True)
class Decision:
    approved: bool
    reason: str = ""
    always: bool = False  # approved for the rest of the thread: the tool asks no more there


def approval_id(thread_id: str, tool_call_id: str) -> str:
    """The request's id: stable for the call (re-executions and every chat showing it agree)."""
    return "ap" + hashlib.sha256(f"{thread_id}:{tool_call_id}".encode()).hexdigest()[:14]


class ApprovalPolicy:
    """The `approvals` rules: what a tool call needs before it runs."""

    def __init__(self, config: ApprovalsConfig) -> None:
        self.config = config
        self._rules = [(rule, [re.compile(p) for p in rule.unless_command]) for rule in config.rules]

    def action(
        self, name: str, args: dict[str, Any], mcp_server: str | None = None, role: str | None = None
    ) -> str:
        """run, ask or refuse, for a call of tool `name` with `args` by a person of `role`."""
        for rule, unless in self._rules:
            if not _matches(rule, name, mcp_server):
                continue
            if rule.roles is not None and role not in rule.roles:
                continue
            command = args.get("command")
            if unless and isinstance(command, str) and any(p.match(command.strip()) for p in unless):
                return "run"
            return rule.action
        return "run"


def _matches(rule: ApprovalRule, name: str, mcp_server: str | None) -> bool:
    for pattern in rule.tools:
        if pattern.startswith("mcp:"):
            if mcp_server is not None and fnmatch.fnmatchcase(mcp_server, pattern[4:]):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def decision_of(answer: Any) -> Decision:
    """A resume value as a decision, in the shapes clients send: `"approve"`/`"deny"`, a bool,
    `{"decision": "approve"|"deny", "reason": ...}`, `{"approved": bool}`, or LangGraph's
    HumanResponse (`{"type": "accept"|"ignore"|"response", "args": ...}`, alone or in a list).
    Anything else is a denial (with what was said as its reason)."""
    if isinstance(answer, list) and answer:
        answer = answer[0]
    if isinstance(answer, bool):
        return Decision(answer)
    if isinstance(answer, str):
        word, _, rest = answer.strip().lower().partition(" ")
        approved = word in APPROVE_WORDS
        always = approved and "always" in (word, rest.strip())
        return Decision(
            approved, answer.strip().partition(" ")[2].strip() if word in ("deny", "no") else "", always
        )
    if isinstance(answer, dict):
        always = bool(answer.get("always")) or str(answer.get("decision", "")).lower() == "always"
        if "approved" in answer:
            approved = bool(answer["approved"])
            return Decision(approved, str(answer.get("reason") or ""), approved and always)
        kind = answer.get("decision", answer.get("type", answer.get("action")))
        reason = answer.get("reason") or (answer.get("args") if answer.get("type") == "response" else "")
        approved = str(kind).lower() in APPROVE_WORDS
        return Decision(approved, str(reason or ""), approved and always)
    return Decision(False, "" if answer is None else str(answer))


class ApprovalMiddleware(AgentMiddleware):
    """Before each tool call: run it, refuse it, or pause the run until a person answers."""

    def __init__(self, config: ApprovalsConfig) -> None:
        super().__init__()
        self.policy = ApprovalPolicy(config)
        self.timeout = config.timeout_seconds

    async def awrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        call = request.tool_call
        args = dict(call.get("args") or {})
        metadata = getattr(request.tool, "metadata", None) or {}
        context = request.runtime.context if request.runtime is not None else None
        role = getattr(context, "role", None)
        action = self.policy.action(call["name"], args, metadata.get("mcp_server"), role)
        if action == "ask" and call["name"] in ((request.state or {}).get("approved_tools") or []):
            action = "run"  # approved "always" earlier in this thread
        if action == "run":
            return await handler(request)
        if action == "refuse":
            return _not_run(call, f"the tool {call['name']} is not allowed here")
        thread_id = str(getattr(context, "thread_id", ""))
        owner = str(getattr(context, "user_id", "default"))
        ident = approval_id(thread_id, str(call["id"]))
        asked_at = time.time()
        # Re-executed on resume: `interrupt` then returns the answer instead of pausing again.
        answer = interrupt(
            {
                "type": APPROVAL,
                "approval_id": ident,
                "tool": call["name"],
                "args": args,
                "tool_call_id": call["id"],
                "user_id": owner,
                # Who asked, in a chat: only they answer there (the router checks).
                "chat_user": getattr(getattr(context, "origin", None), "user_id", None),
                "asked_at": asked_at,
                "expires_at": asked_at + self.timeout,
                "description": describe(call["name"], args),
            }
        )
        decision = _expired(answer) or decision_of(answer)
        log.info("approval %s of %s: %s", ident, call["name"], "approved" if decision.approved else "denied")
        if decision.approved:
            result = await handler(request)
            if decision.always and isinstance(result, ToolMessage):  # remembered in the thread's state
                return Command(update={"messages": [result], "approved_tools": [call["name"]]})
            return result
        why = f": {decision.reason}" if decision.reason else ""
        return _not_run(call, f"the user denied this call{why}")


def _expired(answer: Any) -> Decision | None:
    if isinstance(answer, dict) and answer.get("expired"):
        return Decision(False, "nobody answered the approval request in time")
    return None


def describe(name: str, args: dict[str, Any]) -> str:
    """One line saying what the call would do, for the person asked."""
    command = args.get("command")
    if isinstance(command, str):
        return f"{name}: {command}"
    path = args.get("path") or args.get("file_path")
    if isinstance(path, str):
        return f"{name} {path}"
    shown = ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:3])
    return f"{name}({shown[:200]})"


def _not_run(call: Any, why: str) -> ToolMessage:
    return ToolMessage(
        f"Error: this call was not run: {why}. Choose another way, or tell the user.",
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
    )
