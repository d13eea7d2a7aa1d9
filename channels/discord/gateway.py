"""The discord.py client the adapter runs: which gateway events it asks for, where Discord is, and
gateway payloads it cannot read kept aside instead of ending the connection.

discord.py parses each gateway event (`MESSAGE_CREATE`, `INTERACTION_CREATE`, ...) inside its
connection loop, and an event it cannot parse (a field missing or of a shape it does not know)
raises out of that loop: the client would disconnect, and the same kind of payload would end
the next connection too. `screen_parsers` wraps every parser so that such a payload is handed to
`on_unreadable` with the reason (the adapter dead-letters it, `channels.delivery.unreadable`)
and the connection goes on with the next event; its sequence number still counts, so a resume
does not ask for it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from config import DiscordConfig

log = logging.getLogger(__name__)

OnUnreadable = Callable[[str, Any, str], None]  # (event name, its `d`, why)


def intents(config: DiscordConfig) -> discord.Intents:
    """Guilds (channels and threads), guild and DM messages; the privileged message content intent
    only when the bot must read guild messages that do not mention it (Discord gives the content
    of DMs and of messages mentioning the bot without it)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = not config.require_mention_in_groups
    return wanted


def build_client(config: DiscordConfig, on_unreadable: OnUnreadable) -> discord.Client:
    """The client, its unreadable gateway payloads going to `on_unreadable` (`screen_parsers`).

    discord.py keeps Discord's REST base as a class attribute (`Route.BASE`): with
    `channels.discord.base_url` set (tests, a proxy) it is set for this process, which runs at
    most one Discord adapter."""
    if config.base_url:
        Route.BASE = config.base_url.rstrip("/")
    # The bot never joins voice: no warning that voice's optional packages are missing.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    client = discord.Client(
        intents=intents(config),
        max_messages=None,  # no message cache: the adapter answers each message as it comes
        chunk_guilds_at_startup=False,
        enable_debug_events=False,
    )
    screen_parsers(client, on_unreadable)
    return client


def screen_parsers(client: discord.Client, on_unreadable: OnUnreadable) -> None:
    """Wrap each of the client's gateway event parsers: one that raises hands the event to
    `on_unreadable` instead of ending the connection."""
    parsers: dict[str, Callable[[Any], None]] = client._connection.parsers

    def screened(event: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
        def parse_or_set_aside(data: Any) -> None:
            try:
                parse(data)
            except Exception as exc:
                reason = f"{event}: {type(exc).__name__}: {exc}"
                try:
                    on_unreadable(event, data, reason)
                except Exception:  # never let the report end the connection either
                    log.exception("discord: could not report an unreadable %s event", event)

        return parse_or_set_aside

    for event, parse in list(parsers.items()):
        parsers[event] = screened(event, parse)


async def use_announced_gateway(client: discord.Client) -> None:
    """Connect where `GET /gateway/bot` says (Discord's advice; and the local fake in tests)."""
    _, url, limits = await client.http.get_bot_gateway()
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
    log.info(
        "discord: gateway %s (%s of %s session starts left today)",
        url,
        limits.get("remaining"),
        limits.get("total"),
    )
