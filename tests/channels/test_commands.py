"""The chat commands: every one `/help` lists is answered by the router's dispatch table."""

from __future__ import annotations

from channels.router.commands import COMMANDS
from channels.router.commands.help import HELP
from skills.commands import CHAT_COMMANDS, HELP_INTRO


def test_every_command_help_lists_is_dispatched() -> None:
    listed = [name for name, _ in CHAT_COMMANDS]
    assert [name for name in listed if name not in COMMANDS] == []
    assert all(f"/{name} - " in HELP for name in listed)


def test_the_chats_help_opens_with_the_intro_the_web_ui_shows() -> None:
    assert HELP.startswith(HELP_INTRO + "\n/new - ")
