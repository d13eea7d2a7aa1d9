"""The `approvals` section: which tool calls need a person's yes (`agents.graph.approvals`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from config._env import Section

ApprovalAction = Literal["run", "ask", "refuse"]


class ApprovalRule(Section):
    """One rule; the first whose `tools` match a call decides it."""

    tools: list[str] = Field(
        description="Tool names, `mcp:<server>` for every tool of an MCP server, or shell-style patterns "
        "(`write_*`)."
    )
    action: ApprovalAction = Field("ask", description="run: unasked; ask: wait for a person's yes; refuse.")
    roles: list[str] | None = Field(
        None, description="Only for people of these roles (`access.roles`); null: for everyone."
    )
    unless_command: list[str] = Field(
        default_factory=list,
        description="Regular expressions: a bash call whose command matches one runs unasked "
        "(an allowlist, searched from the command's start).",
    )

    @field_validator("unless_command")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return patterns


class ApprovalsConfig(Section):
    """Tool calls a person approves before they run, answered over HTTP or from the chat."""

    enabled: bool = False
    rules: list[ApprovalRule] = Field(default_factory=list)
    timeout_seconds: float = Field(
        3600, gt=0, description="A request unanswered this long is denied when it is answered or looked at."
    )
