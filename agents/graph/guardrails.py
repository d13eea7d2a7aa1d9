"""Guardrails: before each tool call, a provider decides whether it may run.

    guardrails:
      enabled: true
      use: agents.graph.guardrails:AllowlistProvider   # or module:Class of your own
      allowed_tools: null        # null: every tool not denied
      denied_tools: []
      denied_commands: ['rm\\s+-rf\\s+/']        # regular expressions, for bash

A provider is built once from the `guardrails` section (its extra keys are
its own settings) and answers `await check(call)` with a `Verdict`. A denied
call becomes an error tool message saying why; the run goes on and the model
can choose another way. A provider that fails denies (and says so).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage

from agents.errors import ToolConfigError
from agents.graph.middleware._util import ToolHandler, ToolResult
from agents.loader import load
from config import GuardrailsConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolCallCheck:
    """What a provider decides on: the tool, its arguments, and who runs it."""

    name: str
    args: dict[str, Any]
    user_id: str
    thread_id: str


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


class GuardrailProvider(Protocol):
    async def check(self, call: ToolCallCheck) -> Verdict: ...


class AllowlistProvider:
    """Tools allowed or denied by name; bash commands denied by pattern."""

    def __init__(self, config: GuardrailsConfig) -> None:
        self.allowed = set(config.allowed_tools) if config.allowed_tools is not None else None
        self.denied = set(config.denied_tools)
        self.commands = [re.compile(p) for p in config.denied_commands]

    async def check(self, call: ToolCallCheck) -> Verdict:
        if call.name in self.denied or (self.allowed is not None and call.name not in self.allowed):
            return Verdict(False, f"the tool {call.name} is not allowed here")
        command = call.args.get("command") if call.name == "bash" else None
        if isinstance(command, str):
            for pattern in self.commands:
                if pattern.search(command):
                    return Verdict(False, f"commands matching {pattern.pattern!r} are not allowed here")
        return Verdict(True)


def make_provider(config: GuardrailsConfig) -> GuardrailProvider:
    """The configured provider.

    Raises:
        ToolConfigError: `use` cannot be imported, or its class cannot be built from the section.
    """
    try:
        cls = load(config.use)
        provider = cls(config)
    except Exception as exc:
        raise ToolConfigError(f"guardrails.use {config.use!r}: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(provider, "check", None)):
        raise ToolConfigError(f"guardrails.use {config.use!r}: the provider has no check(call) method")
    return provider  # type: ignore[no-any-return]  # whatever class `use` names, checked above


class GuardrailMiddleware(AgentMiddleware):
    def __init__(self, provider: GuardrailProvider) -> None:
        super().__init__()
        self.provider = provider

    async def awrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        call = request.tool_call
        context = request.runtime.context if request.runtime is not None else None
        check = ToolCallCheck(
            name=call["name"],
            args=dict(call.get("args") or {}),
            user_id=getattr(context, "user_id", "default"),
            thread_id=getattr(context, "thread_id", ""),
        )
        try:
            verdict = await self.provider.check(check)
        except Exception as exc:  # a provider that cannot decide does not let the call through
            log.warning("guardrail provider failed on %s: %s", call["name"], exc)
            verdict = Verdict(False, f"the guardrail could not check this call ({type(exc).__name__})")
        if verdict.allowed:
            return await handler(request)
        log.info("guardrail denied %s: %s", call["name"], verdict.reason)
        return ToolMessage(
            f"Error: this call was not run: {verdict.reason}. Choose another way, or tell the user.",
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
            response_metadata={"refused": verdict.reason},  # the audit trail's `tool_refused`
        )
