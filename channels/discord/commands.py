"""Antler's chat commands as Discord slash commands: registered through the application commands
API, as the skills catalog changes, and taken back as the same text typed to the bot.

Each command has one optional string option, `text`, for what follows it (`/goal write the
summary`, `/models gpt-4o`, a skill's question). Discord accepts names of 1 to 32 lowercase
letters, digits, `-` and `_`, and descriptions of 1 to 100 characters, at most 100 global
commands: the built-in commands first, then each enabled skill whose name Discord accepts (any
skill still works when typed as a message).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import discord

from bus import Bus
from channels.command_names import CHAT_COMMANDS
from skills import SkillsCatalog, follow_catalog

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[-_\w]{1,32}$")
MAX_COMMANDS = 100
TEXT_OPTION = "text"


def _about(text: str) -> str:
    text = " ".join(text.split()) or "an Antler command"
    return text if len(text) <= 100 else text[:99] + "…"


def discord_commands(catalog: SkillsCatalog | None) -> list[dict[str, Any]]:
    """The application's global slash commands (Discord's JSON): the built-in ones, then the enabled
    skills whose names Discord accepts."""
    entries = [(name, about.split(";")[0]) for name, about in CHAT_COMMANDS]
    taken = {name for name, _ in entries}
    for skill in catalog.enabled() if catalog is not None else []:
        if skill.name == skill.name.lower() and _NAME.match(skill.name) and skill.name not in taken:
            taken.add(skill.name)
            first = skill.description.split(". ", 1)[0].strip().rstrip(".")
            entries.append((skill.name, first or f"the {skill.name} skill"))
    return [
        {
            "name": name,
            "description": _about(about),
            "type": 1,  # CHAT_INPUT
            "contexts": [0, 1],  # in guilds and in the bot's DMs
            "options": [
                {
                    "type": 3,  # STRING
                    "name": TEXT_OPTION,
                    "description": "what follows the command",
                    "required": False,
                }
            ],
        }
        for name, about in entries[:MAX_COMMANDS]
    ]


def invoked_text(data: dict[str, Any]) -> str:
    """An application command interaction's `data` as the text a user would type: `/name text`."""
    name = str(data.get("name") or "").strip()
    given = ""
    for option in data.get("options") or []:
        if isinstance(option, dict) and option.get("name") == TEXT_OPTION:
            given = str(option.get("value") or "")
    return f"/{name} {given}".strip()


async def offer_commands(bus: Bus, client: discord.Client) -> None:
    """Keep the application's global commands to the built-in ones and the enabled skills, as the
    skills catalog changes (a bulk overwrite only when they change). Runs until cancelled."""
    offered: list[dict[str, Any]] | None = None

    async def offer(catalog: SkillsCatalog | None) -> None:
        nonlocal offered
        commands = discord_commands(catalog)
        if commands == offered:
            return
        if client.application_id is None:
            log.warning("discord: no application id known yet; slash commands not registered")
            return
        await client.http.bulk_upsert_global_commands(client.application_id, commands)
        offered = commands
        log.info("discord: offering %d slash commands", len(commands))

    await follow_catalog(bus, offer, "discord commands")
