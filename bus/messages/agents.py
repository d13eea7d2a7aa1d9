"""Custom agent definitions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from bus.messages.base import (
    Envelope,
    utcnow,
)


class AgentDefinition(Envelope):
    """A user's custom agent, in KV `<prefix>_agents` (key `AgentDefinition.key(user, name)`).

    Its soul (SOUL.md: personality and instructions) goes into the system prompt of runs with
    its `agent_name`; the rest chooses their model, tools and skills. None means "the default"
    (for `skills` and `tool_groups`: all), an empty list "none".
    """

    user_id: str = "default"
    name: str
    description: str = ""
    soul: str = ""
    model: str | None = None
    tool_groups: list[str] | None = None
    skills: list[str] | None = None
    model_settings: dict[str, Any] | None = None
    thinking_enabled: bool | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @staticmethod
    def key(user_id: str, name: str) -> str:
        """Readable, and one per (user, lower-cased name): users never share a key."""
        import hashlib

        from bus.subjects import safe_token

        digest = hashlib.sha256(f"{user_id}\0{name.lower()}".encode()).hexdigest()[:16]
        return f"{safe_token(user_id)[:64]}.{safe_token(name.lower())[:64]}.{digest}"

    @staticmethod
    def user_prefix(user_id: str) -> str:
        from bus.subjects import safe_token

        return safe_token(user_id)[:64]
