"""Slash commands in a message: `/data-analysis look at sales.csv` names a skill (or a chat command)."""

from __future__ import annotations

import re

# `/name` then a space, a newline or the end; `name@Bot` as Telegram groups send it. A message that
# starts with a path (`/tmp/x.csv is ...`) is not a command.
_SLASH = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9_-]{0,63})(?:@[A-Za-z0-9_]+)?(?=\s|$)(.*)\Z", re.DOTALL)


def slash_command(text: str) -> tuple[str, str] | None:
    """(name, the rest of the message) when `text` starts with a slash command, else None."""
    match = _SLASH.match(text.strip())
    if match is None:
        return None
    return match.group(1).lower(), match.group(2).strip()
