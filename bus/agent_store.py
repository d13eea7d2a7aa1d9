"""Users' custom agents: definitions in KV `<prefix>_agents`, for the gateway and every runner.

A definition (`bus.messages.AgentDefinition`) belongs to one user; others never see it, even
under the same name. The gateway's `/api/agents` and the agent's own `setup_agent` /
`update_agent` tools change them, both through `AgentStore` (atomic, revision-checked writes).
"""

from __future__ import annotations

import re
from typing import Any

from bus.messages import AgentDefinition, utcnow
from bus.records import RecordStore, keys_matching

AGENT_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
MAX_SOUL_CHARS = 64_000
# Fields a create or update may set; the rest (user, name, times) are the store's.
EDITABLE = (
    "description",
    "soul",
    "model",
    "tool_groups",
    "skills",
    "model_settings",
    "thinking_enabled",
    "reasoning_effort",
)


class AgentNameInvalid(ValueError):
    pass


class AgentNotFound(LookupError):
    pass


class AgentExists(ValueError):
    pass


def valid_name(name: str | None) -> str:
    """The name, lower-cased, when it is letters, digits and '-' (at most 64).

    Raises:
        AgentNameInvalid: with what a valid name looks like.
    """
    if not name or not AGENT_NAME.match(name):
        raise AgentNameInvalid(
            f"invalid agent name {name!r}: use 1 to 64 letters, digits and '-' (no spaces, dots or slashes)"
        )
    return name.lower()


def check_fields(fields: dict[str, Any], models: list[str]) -> None:
    """Raises ValueError when a field names a model that does not exist or the soul is too long."""
    model = fields.get("model")
    if model is not None and model not in models:
        raise ValueError(f"unknown model {model!r}; configured models: {', '.join(models) or 'none'}")
    soul = fields.get("soul")
    if soul is not None and len(soul) > MAX_SOUL_CHARS:
        raise ValueError(f"the soul is {len(soul)} characters; at most {MAX_SOUL_CHARS}")


class AgentStore:
    def __init__(self, kv: Any, js: Any, bucket: str) -> None:
        self.records = RecordStore(kv, AgentDefinition)
        self.js = js
        self.bucket = bucket

    @classmethod
    async def open(cls, bus: Any) -> AgentStore:
        bucket = bus.subjects.agents_bucket
        return cls(await bus.kv(bucket), bus.js, bucket)

    async def get(self, user_id: str, name: str) -> AgentDefinition | None:
        found = await self.records.get(AgentDefinition.key(user_id, valid_name(name)))
        return found if found is not None and found.user_id == user_id else None

    async def list(self, user_id: str) -> list[AgentDefinition]:
        keys = await keys_matching(self.js, self.bucket, f"{AgentDefinition.user_prefix(user_id)}.>")
        found = [await self.records.get(key) for key in keys]
        return sorted((a for a in found if a is not None and a.user_id == user_id), key=lambda a: a.name)

    async def create(self, user_id: str, name: str, fields: dict[str, Any]) -> AgentDefinition:
        """Raises AgentNameInvalid, AgentExists."""
        name = valid_name(name)
        agent = AgentDefinition(user_id=user_id, name=name, **_editable(fields))
        if not await self.records.create(AgentDefinition.key(user_id, name), agent):
            raise AgentExists(f"an agent named {name} exists already")
        return agent

    async def update(
        self, user_id: str, name: str, fields: dict[str, Any], *, create: bool = False
    ) -> AgentDefinition:
        """Set `fields` (the others stay); with `create`, a missing agent is made.

        Raises:
            AgentNameInvalid, AgentNotFound
        """
        name = valid_name(name)
        changes = _editable(fields)

        def change(current: AgentDefinition | None) -> AgentDefinition | None:
            if current is None or current.user_id != user_id:
                if not create:
                    return None
                return AgentDefinition(user_id=user_id, name=name, **changes)
            return current.model_copy(update={**changes, "updated_at": utcnow()})

        updated = await self.records.update(AgentDefinition.key(user_id, name), change)
        if updated is None:
            raise AgentNotFound(f"no agent named {name}")
        return updated

    async def delete(self, user_id: str, name: str) -> None:
        """Raises AgentNotFound."""
        if await self.get(user_id, name) is None:
            raise AgentNotFound(f"no agent named {name}")
        await self.records.delete(AgentDefinition.key(user_id, valid_name(name)))


def _editable(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k in EDITABLE}
