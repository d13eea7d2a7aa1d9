"""`/bootstrap <name> [what it should be]`: DeerFlow's bootstrap of a custom agent from a chat. The
message goes on to the agent as a bootstrap run (`is_bootstrap`, `agent_name`): the lead agent talks
the new agent's soul through and saves it with `setup_agent`."""

from __future__ import annotations

import re

from bus.messages import InboundMessage
from channels.router.commands.context import Answer, CommandContext, PassOn

_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    agent, _, brief = argument.strip().partition(" ")
    if not _NAME.match(agent):
        return "Usage: /bootstrap <agent-name> [what it should do] (letters, digits and - in the name)"
    text = brief.strip() or f"Let's create the custom agent {agent}."
    return PassOn(text=text, context={"is_bootstrap": True, "agent_name": agent.lower()})
