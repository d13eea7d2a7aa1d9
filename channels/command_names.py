"""The chat commands every adapter offers (their table is `skills.commands`, which the web UI
shares), and how each platform spells a command.

The router answers the built-in commands and passes a skill's `/name` on to
the agent; `/help` lists both. Telegram lets a bot offer commands to tap
(`setMyCommands`), but only names of lowercase letters, digits and `_`, at
most 32 long: `/data-analysis` is offered and listed there as
`/data_analysis`, and the router takes that spelling back (a skill's name is
matched with `_` and `-` alike: `skills.SkillsCatalog.get`).
"""

from __future__ import annotations

import re

from skills import SkillsCatalog
from skills.commands import CHAT_COMMANDS

__all__ = ["CHAT_COMMANDS", "spelled", "telegram_commands"]

_TELEGRAM_COMMAND = re.compile(r"^[a-z0-9_]{1,32}$")


def spelled(channel: str, name: str) -> str:
    """`name` as a command on `channel` (Telegram: lowercase, `_` for `-`)."""
    return name.lower().replace("-", "_") if channel == "telegram" else name


def telegram_commands(catalog: SkillsCatalog | None) -> list[tuple[str, str]]:
    """(command, description) for Telegram's `setMyCommands`: the built-in commands, then the
    enabled skills whose names Telegram accepts once spelled its way (a longer one is still
    taken when typed, and listed by /help)."""
    commands = [(name, about.split(";")[0]) for name, about in CHAT_COMMANDS]
    taken = {name for name, _ in commands}
    for skill in catalog.enabled() if catalog is not None else []:
        name = spelled("telegram", skill.name)
        if _TELEGRAM_COMMAND.match(name) and name not in taken:
            taken.add(name)
            about = skill.description.split(". ", 1)[0].strip().rstrip(".") or f"the {skill.name} skill"
            commands.append((name, about if len(about) <= 256 else about[:255] + "…"))
    return commands[:100]  # Telegram takes at most 100
