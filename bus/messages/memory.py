"""Long-term memory: updates, the memory document and the memory service's requests."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import (
    Envelope,
    Reply,
    utcnow,
)


class ChatTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant"]
    content: str


class MemoryUpdate(Envelope):
    """A conversation to learn from, on `<prefix>.memory.update.<thread>`.

    The stream keeps only the newest per thread: runs in quick succession
    become one update carrying the whole conversation so far.
    """

    user_id: str = "default"
    agent_name: str | None = None
    thread_id: str
    run_id: str | None = None
    messages: list[ChatTurn] = Field(description="The user's messages and the final answers, in order.")
    created_at: datetime = Field(default_factory=utcnow)


FactCategory = Literal["preference", "knowledge", "context", "behavior", "goal"]


class _Camel(BaseModel):
    """Fields named as DeerFlow's memory.json names them (`by_alias`), read in either spelling."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class MemorySection(_Camel):
    summary: str = ""
    updated_at: datetime | None = Field(None, alias="updatedAt")


class MemoryUser(_Camel):
    work_context: MemorySection = Field(default_factory=MemorySection, alias="workContext")
    personal_context: MemorySection = Field(default_factory=MemorySection, alias="personalContext")
    top_of_mind: MemorySection = Field(default_factory=MemorySection, alias="topOfMind")


class MemoryHistory(_Camel):
    recent_months: MemorySection = Field(default_factory=MemorySection, alias="recentMonths")
    earlier_context: MemorySection = Field(default_factory=MemorySection, alias="earlierContext")
    long_term_background: MemorySection = Field(default_factory=MemorySection, alias="longTermBackground")


class MemoryFact(_Camel):
    id: str = Field(default_factory=lambda: f"fact_{uuid.uuid4().hex[:12]}")
    content: str
    category: FactCategory = "context"
    confidence: float = Field(0.8, ge=0, le=1)
    created_at: datetime = Field(default_factory=utcnow, alias="createdAt")
    source: str | None = Field(None, description="The thread it was learned in, or `manual`, `import`.")


class MemoryDocument(Envelope):
    """What the agent remembers about one user (and custom agent), in KV `<prefix>_memory`.

    DeerFlow's memory.json structure; `model_dump(by_alias=True)` gives its
    camelCase names (`user.workContext`, `history.recentMonths`, `lastUpdated`).
    """

    user_id: str = "default"
    agent_name: str | None = None
    version: str = "1.0"
    last_updated: datetime = Field(default_factory=utcnow, alias="lastUpdated")
    user: MemoryUser = Field(default_factory=MemoryUser)
    history: MemoryHistory = Field(default_factory=MemoryHistory)
    facts: list[MemoryFact] = Field(default_factory=list)

    @staticmethod
    def key(user_id: str, agent_name: str | None = None) -> str:
        """`<user>.<digest>` (`<user>.<agent>.<digest>`): readable, and one key per user and agent
        however alike their ids look once made key-safe (`a.b@x` and `a_b@x`)."""
        import hashlib

        from bus.subjects import safe_token

        digest = hashlib.sha256(f"{user_id}\0{agent_name or ''}".encode()).hexdigest()[:16]
        readable = safe_token(user_id)[:64] + (f".{safe_token(agent_name)[:64]}" if agent_name else "")
        return f"{readable}.{digest}"

    def is_empty(self) -> bool:
        sections = [*self.user.__dict__.values(), *self.history.__dict__.values()]
        return not self.facts and not any(section.summary for section in sections)


class MemoryRequest(Envelope):
    """To the memory updater's `memory` service (`get`, `clear`): one user's (and agent's) document."""

    user_id: str = "default"
    agent_name: str | None = None


class MemoryFactRequest(MemoryRequest):
    """`add_fact` (content required), `update_fact` and `delete_fact` (fact_id required)."""

    fact_id: str | None = None
    content: str | None = Field(None, max_length=4000)
    category: FactCategory | None = None
    confidence: float | None = Field(None, ge=0, le=1)


class MemoryImportRequest(MemoryRequest):
    """`import`: replace the document with an exported one (DeerFlow's memory.json shape)."""

    document: dict[str, Any]


class MemoryReply(Reply):
    """A memory document after a `<prefix>.memory.*` request."""

    document: MemoryDocument | None = None
