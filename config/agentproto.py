"""`agent_protocol:` — Antler's agents on the Synadia Agent Protocol for NATS (`agentproto/`)."""

from __future__ import annotations

from pydantic import Field

from config._env import Section


class AgentProtocolConfig(Section):
    enabled: bool = True
    lead_agent: str = Field(
        "antler", pattern=r"^[a-z0-9-]+$", description="The lead agent's name on the protocol (agent token)."
    )
    sessions: list[str] = Field(
        default_factory=lambda: ["main"],
        description="Sessions registered (discoverable) per agent and owner; any other session name "
        "is served too when a client addresses it.",
    )
    heartbeat_seconds: int = Field(30, gt=0, description="Between heartbeats of every registered session.")
    keepalive_seconds: float = Field(
        15.0,
        gt=0,
        description="Between status `ack` chunks while a run works (each checks the caller is still there).",
    )
    clarification_timeout_seconds: float = Field(
        600.0, gt=0, description="How long a question (query chunk) waits for the caller's answer."
    )
    max_payload_mb: int = Field(8, gt=0, description="Largest prompt advertised (attachments included).")
