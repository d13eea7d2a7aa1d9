"""The Matrix adapter: matrix-nio's sync loop in, the router's replies out.

Inbound: the bot joins the rooms it is invited to (by `allowed_users`, when that is set). A
message in a room with only the bot and one person (a direct chat) is answered; in a larger room,
a message that mentions the bot (its user id, a pill to it, or `m.mentions`) or replies to one
of its messages (every message with `require_mention_in_groups: false`). A room is one
conversation and each Matrix thread in it one of its own (topic: the thread's root event).
Images and files are downloaded from the content repository and staged for the router. Edits of
messages are not followed. A message the adapter fails on is dead-lettered with the reason. The
bot cannot read end-to-end encrypted rooms (it keeps no encryption keys): a message there is
answered once per room with a notice saying so, in plain text.

Outbound: the first partial answer is sent (a reply to the message in a room; in its thread for a
thread), then edited (`m.replace`) as the answer streams, and the final text replaces it; a long
answer continues in more messages; presented files follow as `m.image` or `m.file` messages.

The sync position (`next_batch`) is kept in KV after each sync's messages are on the bus, so a
copy that takes over goes on from there: messages sent while no copy synced are answered then.
One copy is active at a time (every sync of an account sees every message): the others stand by.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import nio
from nats.js.errors import KeyNotFoundError

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
from channels.matrix.client import edit_text, post_text, send, thread_relation, upload
from config import AppConfig
from config.channels import MatrixConfig

log = logging.getLogger(__name__)

CHANNEL = "matrix"
LIMIT_BYTES = 24_000  # per message: an edit carries the text twice, under the 65,536-byte event limit
MAX_FILE = 50 * 1024 * 1024  # Synapse's default max_upload_size
SYNC_KEY = f"{CHANNEL}.since"
MAX_TIMEOUTS = 3  # connection failures in a row nio tries again before the call fails
REQUEST_TIMEOUT = 60.0  # seconds a call may take (a sync waits 30 s for news on the server)
ENCRYPTED_NOTICE = (
    "I can't read end-to-end encrypted rooms: this room is encrypted, so I cannot see what is written "
    "here. Talk to me in a room without encryption."
)


class MatrixAdapter(Surface):
    def __init__(self, bus: Bus, client: nio.AsyncClient, settings: MatrixConfig) -> None:
        self.bus = bus
        self.client = client
        self.settings = settings
        self._told_encrypted: set[str] = set()

    # ------------------------------------------------------------------ inbound

    async def on_invite(self, room: nio.MatrixRoom, event: nio.InviteMemberEvent) -> None:
        """Join a room the bot is invited to; with `allowed_users` set, only on their invitation."""
        if event.state_key != self.client.user_id or event.membership != "invite":
            return
        allowed = self.settings.allowed_users
        if allowed and event.sender not in allowed:
            log.info(
                "matrix: declining %s's invitation to %s (not in allowed_users)", event.sender, room.room_id
            )
            await self.client.room_leave(room.room_id)
            return
        joined = await self.client.join(room.room_id)
        log.info("matrix: invited to %s by %s: %s", room.room_id, event.sender, type(joined).__name__)

    async def on_message(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        try:
            await self._inbound(room, event)
        except Exception as exc:  # never fatal: kept in the DLQ with the reason
            raw = json.dumps({"room_id": room.room_id, **event.source}).encode()
            await dead_letter_unreadable(
                self.bus, CHANNEL, raw, f"{type(exc).__name__}: {exc}", getattr(event, "event_id", "")
            )

    async def on_encrypted(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        """A message the bot cannot decrypt: the room is told once why it gets no answer."""
        if event.sender == self.client.user_id or room.room_id in self._told_encrypted:
            return
        self._told_encrypted.add(room.room_id)
        log.info("matrix: refusing encrypted room %s", room.room_id)
        try:
            await send(self.client, room.room_id, {"msgtype": "m.notice", "body": ENCRYPTED_NOTICE}, "send")
        except Exception as exc:
            log.warning("matrix: could not tell room %s it is encrypted: %s", room.room_id, exc)

    async def _inbound(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        me = self.client.user_id
        if event.sender == me:
            return
        content = event.source.get("content") or {}
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            return  # an edit: not followed (a second run for an answer given would surprise)
        if content.get("msgtype") == "m.notice":
            return  # what bots send (the spec asks them never to answer one): no loops between bots
        if room.encrypted:
            await self.on_encrypted(room, event)
            return
        private = room.member_count <= 2
        mentioned = self._mentions_me(content)
        reply_to_bot = not private and not mentioned and await self._replies_to_me(room, relation)
        if not private and not (mentioned or reply_to_bot) and self.settings.require_mention_in_groups:
            return
        text = (
            self._without_mention(str(content.get("body") or ""), room)
            if isinstance(event, nio.RoomMessageText)
            else ""
        )
        files = await self._files_in(room, event) if isinstance(event, nio.RoomMessageMedia) else []
        if not text and not files:
            return
        thread = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
        inbound = InboundMessage(
            channel=CHANNEL,
            chat_id=room.room_id,
            topic_id=thread,
            user_id=event.sender,
            user_name=room.user_name(event.sender) or event.sender,
            message_id=event.event_id,
            chat_type="private" if private else "group",
            mentioned=mentioned,
            reply_to_bot=reply_to_bot,
            text=text,
            files=files,
        )
        await store_inbound(self.bus, CHANNEL, inbound)
        log.info("matrix: message %s in %s from %s is on the bus", event.event_id, room.room_id, event.sender)

    async def _replies_to_me(self, room: nio.MatrixRoom, relation: dict[str, Any]) -> bool:
        """Whether the message is a reply to one of the bot's (asked of the homeserver)."""
        answered = (relation.get("m.in_reply_to") or {}).get("event_id")
        if not answered or relation.get("is_falling_back"):
            return False  # a thread's fallback reply is not a reply to anyone in particular
        found = await self.client.room_get_event(room.room_id, answered)
        return isinstance(found, nio.RoomGetEventResponse) and found.event.sender == self.client.user_id

    def _mentions_me(self, content: dict[str, Any]) -> bool:
        me = self.client.user_id
        if me in ((content.get("m.mentions") or {}).get("user_ids") or []):
            return True
        return me in str(content.get("body") or "") or me in str(content.get("formatted_body") or "")

    def _without_mention(self, body: str, room: nio.MatrixRoom) -> str:
        me = self.client.user_id
        text = re.sub(rf"{re.escape(me)}[,:]?[ \t]*", "", body)
        names = {me.split(":")[0].lstrip("@"), room.user_name(me) or ""} - {""}
        for name in names:  # a client's pill falls back to "name: " in the plain body
            text = re.sub(rf"^@?{re.escape(name)}[,:][ \t]*", "", text)
        return text.strip()

    async def _files_in(self, room: nio.MatrixRoom, event: nio.RoomMessageMedia) -> list[FileRef]:
        info = (event.source.get("content") or {}).get("info") or {}
        if int(info.get("size") or 0) > MAX_FILE:
            log.info("matrix: skipping %s (%s bytes, over the limit)", event.body, info.get("size"))
            return []
        response = await self.client.download(mxc=event.url)
        if not isinstance(response, nio.DownloadResponse):
            raise RuntimeError(f"the file {event.url} could not be downloaded: {response}")
        name = str((event.source.get("content") or {}).get("filename") or event.body or "file")
        store = await self.bus.files()
        data = response.body if isinstance(response.body, bytes) else bytes(response.body)
        return [
            await stage_chat_file(
                store, CHANNEL, room.room_id, event.event_id, name, data, info.get("mimetype") or None
            )
        ]

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT_BYTES, measure=lambda piece: len(piece.encode()))

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        reply_to = out.reply_to if out.reply_to and out.reply_to.startswith("$") else None
        event = await post_text(self.client, out.chat_id, text, out.topic_id, reply_to)
        return {"room": out.chat_id, "event": event}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        await edit_text(self.client, ref["room"], ref["event"], text)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        await post_text(self.client, out.chat_id, text, out.topic_id)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        if len(data) > MAX_FILE:
            await self.post_more(out, f"(I made {file.name}, but it is too large to send here.)")
            return
        kind = file.content_type or "application/octet-stream"
        uri = await upload(self.client, file.name, data, kind)
        content = {
            "msgtype": "m.image" if kind.startswith("image/") else "m.file",
            "body": file.name,
            "filename": file.name,
            "url": uri,
            "info": {"mimetype": kind, "size": len(data)},
            **thread_relation(out.topic_id),
        }
        await send(self.client, out.chat_id, content, "send a file")


async def run(bus: Bus, config: AppConfig) -> None:
    """The Matrix adapter component: the account's sync in, replies out, until cancelled. One copy is
    active at a time; the others stand by and take over (from the sync position kept in KV) when it
    dies. Credentials the homeserver refuses are `Misconfigured`, a homeserver out of reach
    `Unreachable`."""
    settings = config.channels.matrix
    for name in ("homeserver", "user_id"):
        if not settings.resolved(name):
            raise Misconfigured(f"channels.matrix.{name} is not set")
    if not settings.resolved("access_token") and not settings.resolved("password"):
        raise Misconfigured("channels.matrix: set access_token (with device_id) or password")
    await standby.serve_while_active(
        bus, CHANNEL, config.bus.lease_seconds, lambda lost: _serve(bus, settings, lost)
    )


async def _serve(bus: Bus, settings: MatrixConfig, lost: asyncio.Event) -> None:
    homeserver = str(settings.resolved("homeserver"))
    client = nio.AsyncClient(
        homeserver,
        str(settings.resolved("user_id")),
        device_id=settings.resolved("device_id") or "",
        # nio would otherwise sleep inside a call and send it again, forever: a 429 comes back to
        # the reply stream (which waits it out holding no consumer slot, newest text only), and a
        # homeserver out of reach raises after a few tries (`Unreachable`: restarted with backoff)
        config=nio.AsyncClientConfig(
            store_sync_tokens=False,
            encryption_enabled=False,
            max_limit_exceeded=0,
            max_timeouts=MAX_TIMEOUTS,
            request_timeout=REQUEST_TIMEOUT,
        ),
    )
    adapter = MatrixAdapter(bus, client, settings)
    kv = await bus.kv(bus.subjects.replies_bucket)
    work: list[asyncio.Task[Any]] = []
    try:
        await _log_in(client, settings, homeserver)
        since = await _stored_since(kv)
        if since is None:  # a first start: what was said before it is not for us
            first = await client.sync(timeout=0, full_state=True)
            _check_sync(first, homeserver)
            await kv.put(SYNC_KEY, str(client.next_batch).encode())
        else:
            client.next_batch = since
        client.add_event_callback(adapter.on_invite, nio.InviteMemberEvent)
        client.add_event_callback(adapter.on_message, (nio.RoomMessageText, nio.RoomMessageMedia))
        client.add_event_callback(adapter.on_encrypted, nio.MegolmEvent)

        async def keep_position(response: nio.SyncResponse) -> None:
            await kv.put(SYNC_KEY, str(response.next_batch).encode())  # its messages are on the bus

        client.add_response_callback(keep_position, nio.SyncResponse)
        for room_id in list(client.invited_rooms):
            await client.join(room_id)
        log.info("matrix adapter: syncing as %s on %s", client.user_id, homeserver)
        work = [
            asyncio.create_task(
                client.sync_forever(timeout=30_000, since=client.next_batch), name="matrix-sync"
            ),
            asyncio.create_task(
                run_consumers(reply_consumer(bus, CHANNEL, ReplyStream(bus, CHANNEL, adapter).deliver))
            ),
            asyncio.create_task(standby.watch(lost, CHANNEL)),
        ]

        async def connected() -> bool:
            return bool(client.logged_in) and not work[0].done()

        helpers = [
            asyncio.create_task(watch_connection(CHANNEL, connected, f"the sync with {homeserver} stopped"))
        ]
        try:
            done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            raise Unreachable(_host(homeserver), "the sync loop ended")
        finally:
            await cancel_and_wait(*helpers)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise Unreachable(_host(homeserver), f"{type(exc).__name__}: {exc}") from exc
    finally:
        await cancel_and_wait(*work)
        await asyncio.shield(client.close())


async def _log_in(client: nio.AsyncClient, settings: MatrixConfig, homeserver: str) -> None:
    token = settings.resolved("access_token")
    if token:
        client.restore_login(client.user, settings.resolved("device_id") or "", token)
        who = await client.whoami()
        if isinstance(who, nio.WhoamiError):
            raise Misconfigured(
                f"the homeserver refused the access token ({who.status_code}): "
                "check channels.matrix.access_token"
            )
        return
    response = await client.login(settings.resolved("password"), device_name="antler")
    if isinstance(response, nio.LoginError):
        raise Misconfigured(
            f"the homeserver refused the login ({response.status_code}): "
            "check channels.matrix.user_id and password"
        )


def _check_sync(response: Any, homeserver: str) -> None:
    if isinstance(response, nio.SyncError):
        if response.status_code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
            raise Misconfigured("the homeserver refused the access token: check channels.matrix")
        raise Unreachable(
            _host(homeserver), f"the first sync failed: {response.status_code} {response.message}"
        )


async def _stored_since(kv: Any) -> str | None:
    try:
        entry = await kv.get(SYNC_KEY)
    except KeyNotFoundError:
        return None
    return entry.value.decode() if entry.value else None


def _host(homeserver: str) -> str:
    return urlsplit(homeserver).netloc or homeserver
