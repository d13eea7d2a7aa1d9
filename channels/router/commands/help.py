"""`/help` (and `/start`, which platforms send first), a skill's `/name`, and any other command.

A skill's name that is enabled goes on to the agent (the runner activates the skill); one switched
off, or no command at all, is answered with the help: the built-in commands (the table the web UI
shares, `skills.commands`) and the enabled skills, as this platform spells them.
"""

from __future__ import annotations

from bus.messages import InboundMessage
from channels.command_names import spelled
from channels.router.commands.context import Answer, CommandContext, PassOn
from skills import read_catalog, skills_help
from skills.commands import CHAT_COMMANDS, HELP_INTRO

HELP = HELP_INTRO + "\n" + "\n".join(f"/{name} - {about}" for name, about in CHAT_COMMANDS)


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    catalog = await read_catalog(ctx.bus)
    skill = catalog.get(name) if catalog is not None else None
    if skill is not None and skill.enabled:
        return PassOn()  # the runner activates it
    listed = skills_help(catalog, lambda skill: spelled(message.channel, skill))
    full_help = HELP + (f"\n\n{listed}" if listed else "")
    if name in ("help", "start"):
        return full_help
    if skill is not None:
        return (
            f"The skill /{spelled(message.channel, skill.name)} is switched off here; "
            "an administrator can enable it."
        )
    return f"There is no command or skill called /{name}.\n\n{full_help}"
