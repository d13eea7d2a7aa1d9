"""The Discord adapter: discord.py's gateway connection in, the router's replies out.

Inbound: a direct message, or a guild message that mentions the bot (or replies to it; every
guild message with `require_mention_in_groups: false`), becomes an InboundMessage on
`<prefix>.chat.in.discord`, deduplicated by channel and message id. A conversation is the DM,
the guild channel, or the Discord thread the message is in (chat id: the thread's parent
channel, topic: the thread). Attachments are read from Discord's CDN and staged for the router.
Slash commands (`/new`, `/goal ...`, a skill's `/name ...`: `channels.discord.commands`) are
answered at once with the command as typed, then taken as that text typed to the bot.
Gateway payloads discord.py cannot parse are dead-lettered with the reason
(`channels.discord.gateway`).

Outbound: the first partial answer is posted (as a reply to the user's message), then edited
as the answer streams, and the final text replaces it; a long answer continues in more
messages of at most 2,000 characters, cut at paragraph or line ends; presented files follow as
attachments. Discord renders Markdown itself, so the model's text goes as it is, pinging
nobody. Rate limits are the reply stream's to wait out (`channels.discord.rest`).

One copy per bot is active (Discord sends every event to every session of an unsharded bot):
the others stand by (`channels.delivery.standby`) and take over when it dies, resuming its gateway
session so that what was sent meanwhile is replayed (`channels.discord.session`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import OrderedDict
from typing import Any

import aiohttp
import discord

from bus import Bus, Misconfigured, Unreachable, run_consumers
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.delivery import standby
from channels.delivery.connection_health import watch_connection
from channels.delivery.consumer import reply_consumer
from channels.delivery.inbound import store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.splitting import split_text
from channels.delivery.surface import Surface
from channels.delivery.unreadable import dead_letter_unreadable
from channels.discord import session
from channels.discord.commands import invoked_text, offer_commands
from channels.discord.gateway import build_client, use_announced_gateway
from channels.discord.rest import DiscordRest
from config import AppConfig, DiscordConfig

log = logging.getLogger(__name__)

LIMIT = 2000  # characters per message
MAX_FILE_IN = 25 * 1024 * 1024  # attachments read from users
MAX_FILE_OUT = 10 * 1024 * 1024  # Discord's upload limit for a bot in a server without boosts
THREAD_TYPES = {
    discord.ChannelType.news_thread,
    discord.ChannelType.public_thread,
    discord.ChannelType.private_thread,
}
_KNOWN_CHANNELS = 5000  # channels whose parent (thread or not) the adapter remembers


class DiscordAdapter(Surface):
    def __init__(self, bus: Bus, client: discord.Client, config: DiscordConfig, rest: DiscordRest) -> None:
        self.bus = bus
        self.client = client
        self.config = config
        self.rest = rest
        self.replies = ReplyStream(bus, "discord", self)
        self._places: OrderedDict[int, tuple[str, str | None]] = OrderedDict()  # channel -> (chat, topic)

    # ------------------------------------------------------------------ inbound

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self._inbound(message)
        except Exception as exc:  # never fatal: kept in the DLQ with the reason
            raw = {
                "id": str(message.id),
                "channel_id": str(message.channel.id),
                "author": str(message.author.id),
                "content": message.content,
            }
            await dead_letter_unreadable(
                self.bus,
                "discord",
                json.dumps(raw).encode(),
                f"{type(exc).__name__}: {exc}",
                f"{message.channel.id}:{message.id}",
            )

    async def _inbound(self, message: discord.Message) -> None:
        me = self.client.user
        if me is None or message.author.bot or message.author.id == me.id:
            return  # bots, ourselves included
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return  # joins, pins, thread starts: nothing asked
        # A resumed session has no guild cache (no GUILD_CREATE): its channels come as partial
        # ones, which still know their guild.
        private = message.guild is None and getattr(message.channel, "guild_id", None) is None
        mentioned = me.id in message.raw_mentions
        replied = message.reference.resolved if message.reference else None
        reply_to_bot = isinstance(replied, discord.Message) and replied.author.id == me.id
        if not private and not (mentioned or reply_to_bot) and self.config.require_mention_in_groups:
            return  # guild chatter the bot was not asked about
        text = re.sub(rf"<@!?{me.id}>[,:]?", "", message.content)
        text = re.sub(r"[ \t]{2,}", " ", text).strip()
        chat_id, topic_id = await self._place(message.channel)
        files = await self._files_in(message, chat_id)
        if not text and not files:
            return  # a sticker, an embed alone: nothing to answer
        await self._publish(
            (chat_id, topic_id),
            message.author,
            str(message.id),
            private,
            text,
            mentioned=mentioned,
            reply_to_bot=reply_to_bot,
            files=files,
        )

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A slash command: answered at once with the command as typed (Discord wants an answer
        within 3 seconds), once the bus has it as that text typed to the bot."""
        if interaction.type != discord.InteractionType.application_command:
            return
        try:
            text = invoked_text(dict(interaction.data or {}))
            channel = interaction.channel
            if channel is None or interaction.channel_id is None:
                raise ValueError("an application command without a channel")
            await self._publish(
                await self._place(channel),
                interaction.user,
                f"slash-{interaction.id}",  # no message: the interaction names it
                interaction.guild_id is None,
                text,
                mentioned=True,  # invoked on the bot by name
            )
        except Exception as exc:
            log.exception("discord: could not take the slash command %s", interaction.id)
            await _answer(interaction, f"Sorry, I could not take that ({type(exc).__name__}).", True)
            return
        await _answer(interaction, text[:LIMIT], False)

    async def _publish(
        self,
        place: tuple[str, str | None],
        user: discord.User | discord.Member,
        message_id: str,
        private: bool,
        text: str,
        **more: Any,
    ) -> None:
        """What `user` sent in a place (`_place`: chat and topic) onto the bus, as text to the bot."""
        chat_id, topic_id = place
        inbound = InboundMessage(
            channel="discord",
            chat_id=chat_id,
            topic_id=topic_id,
            user_id=str(user.id),
            user_name=user.display_name,
            message_id=message_id,
            chat_type="private" if private else "group",
            text=text,
            **more,
        )
        await store_inbound(self.bus, "discord", inbound)

    async def _place(self, channel: Any) -> tuple[str, str | None]:
        """(chat id, topic id) of a channel: a thread is a topic of its parent channel."""
        known = self._places.get(channel.id)
        if known is not None:
            return known
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            try:  # not in the client's cache (a thread made while the bot was away): ask Discord
                channel = await self.client.fetch_channel(channel.id)
            except discord.HTTPException as exc:
                log.warning("discord: could not look up channel %s: %s", channel.id, exc)
        if isinstance(channel, discord.Thread) or getattr(channel, "type", None) in THREAD_TYPES:
            place: tuple[str, str | None] = (str(channel.parent_id), str(channel.id))
        else:
            place = (str(channel.id), None)
        self._places[channel.id] = place
        while len(self._places) > _KNOWN_CHANNELS:
            self._places.popitem(last=False)
        return place

    async def _files_in(self, message: discord.Message, chat_id: str) -> list[FileRef]:
        staged: list[FileRef] = []
        for attachment in message.attachments:
            if attachment.size > MAX_FILE_IN:
                log.info(
                    "discord: skipping %s (%d bytes, over the limit)", attachment.filename, attachment.size
                )
                continue
            data = await attachment.read()
            store = await self.bus.files()
            staged.append(
                await stage_chat_file(
                    store,
                    "discord",
                    chat_id,
                    str(message.id),
                    attachment.filename,
                    data,
                    attachment.content_type,
                )
            )
        return staged

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        channel = out.topic_id or out.chat_id
        reply_to = out.reply_to if out.reply_to and out.reply_to.isdigit() else None
        sent = await self.rest.create_message(channel, text, reply_to=reply_to)
        return {"channel": channel, "message": str(sent["id"])}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        await self.rest.edit_message(ref["channel"], ref["message"], text)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        await self.rest.create_message(out.topic_id or out.chat_id, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        if len(data) > MAX_FILE_OUT:
            megabytes = len(data) / (1024 * 1024)
            await self.post_more(
                out, f"(I made {file.name}, but at {megabytes:.1f} MB it is too large for Discord.)"
            )
            return
        await self.rest.send_file(out.topic_id or out.chat_id, file.name, data)


async def _answer(interaction: discord.Interaction, text: str, ephemeral: bool) -> None:
    try:
        await interaction.response.send_message(text or "…", ephemeral=ephemeral)
    except discord.HTTPException as exc:  # expired (over 3 s) or answered: the message is on the bus
        log.warning("discord: could not answer interaction %s: %s", interaction.id, exc)


async def run(bus: Bus, config: AppConfig) -> None:
    """The Discord adapter component: the gateway in, replies out, until cancelled. One copy per bot
    is active at a time; the others stand by and take over when it dies.

    A token Discord refuses raises `Misconfigured`, Discord out of reach `Unreachable`: the runtime
    starts the adapter again later (`bus.supervision`) while the rest of Antler serves. Once
    connected, discord.py reconnects (resuming its session) by itself; the adapter says it is
    unhealthy meanwhile."""
    settings = config.channels.discord
    if not settings.resolved("bot_token"):
        raise Misconfigured("channels.discord.bot_token is not set")
    await standby.serve_while_active(
        bus, "discord", config.bus.lease_seconds, lambda lost: _serve(bus, settings, lost)
    )


async def _serve(bus: Bus, settings: DiscordConfig, lost: asyncio.Event) -> None:
    token = settings.resolved("bot_token") or ""
    pending: set[asyncio.Task[None]] = set()

    def on_unreadable(event: str, data: Any, reason: str) -> None:
        raw = json.dumps({"t": event, "d": data}, default=str).encode()
        ident = f"{event}:{data.get('id')}" if isinstance(data, dict) and data.get("id") else ""
        task = asyncio.create_task(dead_letter_unreadable(bus, "discord", raw, reason, ident))
        pending.add(task)
        task.add_done_callback(pending.discard)

    client = build_client(settings, on_unreadable)
    rest = DiscordRest(token, settings.base_url)
    adapter = DiscordAdapter(bus, client, settings, rest)
    client.event(_named("on_message", adapter.on_message))
    client.event(_named("on_interaction", adapter.on_interaction))
    host = _host(settings)
    work: list[asyncio.Task[Any]] = []
    try:
        try:
            await client.login(token)
            await use_announced_gateway(client)
        except discord.LoginFailure as exc:
            raise Misconfigured("Discord refused the bot token: check channels.discord.bot_token") from exc
        except (aiohttp.ClientError, OSError, discord.GatewayNotFound) as exc:
            raise Unreachable(host, f"{type(exc).__name__}: {exc}") from exc
        stored = await session.load(bus)
        if stored is not None:  # the last active copy's session: what it missed is replayed
            session.resume_stored(client, stored)
        resumed = asyncio.Event()  # a resumed session sends RESUMED, never READY
        client.event(_named("on_resumed", lambda: _set(resumed)))
        connecting = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        work.append(connecting)
        ready = [asyncio.create_task(client.wait_until_ready()), asyncio.create_task(resumed.wait())]
        await asyncio.wait([connecting, *ready], return_when=asyncio.FIRST_COMPLETED)
        if not any(task.done() for task in ready):
            await cancel_and_wait(*ready)
            connecting.result()  # the connection ended before READY: say why
        await cancel_and_wait(*ready)
        assert client.user is not None
        how = "resumed the session" if resumed.is_set() else "connected"
        log.info("discord adapter %s as %s (%s)", how, client.user, client.user.id)

        async def connected() -> bool:
            return client.ws is not None and client.ws.open and not client.is_closed()

        down = f"the gateway connection to {host} is down; discord.py is reconnecting"
        work += [
            asyncio.create_task(run_consumers(reply_consumer(bus, "discord", adapter.replies.deliver))),
            asyncio.create_task(standby.watch(lost, "discord")),
        ]
        helpers = [
            asyncio.create_task(offer_commands(bus, client), name="discord-commands"),
            asyncio.create_task(watch_connection("discord", connected, down), name="discord-health"),
            asyncio.create_task(session.keep_saved(bus, client), name="discord-session"),
        ]
        try:
            done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            raise Unreachable(host, "the gateway connection ended")
        finally:
            await cancel_and_wait(*helpers)
    except discord.ConnectionClosed as exc:
        if exc.code == 4014:
            raise Misconfigured(
                "Discord refused the message content intent: enable it in the developer portal, "
                "or set channels.discord.require_mention_in_groups: true"
            ) from exc
        if exc.code == 4004:
            raise Misconfigured("Discord refused the bot token: check channels.discord.bot_token") from exc
        raise Unreachable(host, f"the gateway closed the connection ({exc.code})") from exc
    finally:
        await cancel_and_wait(*work)
        await asyncio.shield(_close(client, rest))
        await asyncio.gather(*pending, return_exceptions=True)


async def _set(event: asyncio.Event) -> None:
    event.set()


def _named(name: str, handler: Any) -> Any:
    """`handler` under the event name discord.py dispatches by (`Client.event` reads `__name__`)."""

    async def call(*args: Any) -> None:
        await handler(*args)

    call.__name__ = name
    return call


async def _close(client: discord.Client, rest: DiscordRest) -> None:
    try:
        await client.close()
    except Exception as exc:
        log.warning("discord: closing: %s", exc)
    await rest.aclose()


def _host(settings: DiscordConfig) -> str:
    from urllib.parse import urlsplit

    return urlsplit(settings.base_url or "https://discord.com").netloc
