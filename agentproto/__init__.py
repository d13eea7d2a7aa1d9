"""Antler's agents on the Synadia Agent Protocol for NATS, natively on the bus.

Any client of the protocol (the `synadia-ai-agents` SDK, the TypeScript SDK, `nats req`) discovers
the lead agent and each enabled owner's custom agents through `$SRV.INFO.agents`, prompts them
on `agents.prompt.<agent>.<owner>.<session>` (the session is a thread, the owner its user), and
reads the answer streamed back: `agentproto.host` (services, heartbeats, which owners),
`agentproto.prompt` (one prompt: runs, questions, cancellation, errors), `agentproto.answer`
(run events to chunks). docs/architecture.md says why this is not the host SDK's AgentService.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bus import Bus
    from config import AppConfig

__all__ = ["run"]


async def run(bus: Bus, config: AppConfig) -> Any:
    """The component's entry (imports the host lazily: `import agentproto` stays light)."""
    from agentproto.host import run as run_host

    return await run_host(bus, config)
