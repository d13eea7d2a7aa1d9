"""The chat commands every adapter offers, and how each platform spells a command.

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

# (name, what it does): the router's own commands, in the order /help lists them.
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "start a fresh conversation"),
    ("status", "this conversation, its model and whether I am busy"),
    ("models", "list models; /models <name> - use one in this chat"),
    ("memory", "what I remember about you"),
    ("goal", "set a goal I keep working on by myself; /goal shows it, /goal clear stops it"),
    ("compact", "summarise this conversation so far, to free room"),
    ("schedule", "do something on a schedule: /schedule every weekday 08:00 Europe/Berlin <what>"),
    ("schedules", "your scheduled tasks in this chat"),
    ("unschedule", "remove a scheduled task: /unschedule <number>"),
    ("help", "this help"),
)

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
