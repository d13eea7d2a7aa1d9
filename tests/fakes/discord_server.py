"""A fake Discord on 127.0.0.1: REST API v10 and the Gateway websocket, for discord.py and our adapter.

Written from Discord's developer documentation (Gateway, Rate Limits, Message
and Interaction resources), not from any SDK:

- REST under `/api/v10`: `GET /users/@me`, `GET /gateway/bot`, `GET /channels/{id}`,
  `POST /channels/{id}/messages` (JSON, or multipart with `payload_json` and
  `files[n]`), `PATCH /channels/{id}/messages/{id}`, `PUT /applications/{id}/commands`,
  `POST /interactions/{id}/{token}/callback`. Every call needs `Authorization: Bot <token>`.
  Message routes are limited per channel (a bucket of `bucket_size` calls per
  `bucket_seconds`, announced in `X-RateLimit-*` headers); a call past it, or one a test
  armed with `flood.arm`, gets 429 with `retry_after` (and `global` when the whole bot is
  limited), `Retry-After`, `X-RateLimit-Scope` and the `Via` header Discord's edge adds.
  Content over 2,000 characters is refused with 400 (code 50035); a file over 10 MiB with
  413 (code 40005).
- The Gateway at `/gateway` (zstd-stream, zlib-stream or no transport compression, as the
  `compress` query asks): HELLO, then IDENTIFY (token and intents checked: close 4004 for a
  wrong token, 4014 for a privileged intent the portal does not grant) or RESUME of a
  session that is still resumable (the events it missed are replayed, then RESUMED; else
  INVALID_SESSION), READY and one GUILD_CREATE per guild, heartbeats acknowledged. Events go
  to every live session (Discord's behaviour without sharding: two copies of a bot
  connected at once would both see every message), filtered by the session's intents; a
  guild message's content is blanked for a session without MESSAGE_CONTENT unless the bot
  is mentioned in it.

Tests write as users (`user_message`, `slash_command`), read what the bot did from `calls`
and `messages`, and push payloads as they like (`dispatch`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import zstandard
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response

from tests.fakes._server import LocalServer

BOT_ID = "900000000000000001"
APPLICATION_ID = "900000000000000002"
GUILD_ID = "800000000000000001"
GENERAL = "800000000000000010"  # a text channel of the guild
THREAD = "800000000000000011"  # a public thread in it
USER_ID = "700000000000000001"
DM_CHANNEL = "700000000000000100"

GUILDS = 1 << 0
GUILD_MESSAGES = 1 << 9
DIRECT_MESSAGES = 1 << 12
MESSAGE_CONTENT = 1 << 15
PRIVILEGED = (1 << 1) | (1 << 8) | MESSAGE_CONTENT

MAX_CONTENT = 2000
MAX_FILE = 10 * 1024 * 1024

_snowflakes = itertools.count(int(time.time() * 1000) << 22)


def snowflake() -> str:
    return str(next(_snowflakes))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        **({"bot": True} if bot else {}),
    }


BOT_USER = _user(BOT_ID, "antler", bot=True)


@dataclass
class Session:
    id: str
    intents: int
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)  # dispatches, for a resume to replay
    queue: asyncio.Queue[dict[str, Any] | None] | None = None  # the live connection's, if any
    resumable_until: float = 0.0


class FakeDiscord(LocalServer):
    def __init__(self, token: str = "fake.bot.token") -> None:
        super().__init__()
        self.token = token
        self.app = FastAPI()
        self.bucket_size = 5
        self.bucket_seconds = 5.0
        self.shared_bucket = False  # True: posts and edits in a channel count against one bucket
        self.heartbeat_ms = 1000
        self.message_content_granted = True  # the portal's switch for the privileged intent
        self.sessions: dict[str, Session] = {}
        self.live = 0  # gateway connections that identified or resumed, open now
        self.most_live = 0
        self.identified = 0
        self.resumed = 0
        self.invalid_sessions_told = 0  # RESUMEs answered op 9
        self.messages: dict[str, dict[str, Any]] = {}  # id -> message as it is now (bot's and users')
        self.commands: list[dict[str, Any]] = []  # the application's global commands
        self.attachments: dict[str, bytes] = {}
        self.refused: list[tuple[str, str]] = []  # (route, channel) of every 429 answered
        self._windows: dict[tuple[str, str], list[float]] = defaultdict(list)
        self._channels: dict[str, dict[str, Any]] = {
            GENERAL: {"id": GENERAL, "type": 0, "guild_id": GUILD_ID, "name": "general", "position": 0},
            THREAD: {
                "id": THREAD,
                "type": 11,
                "guild_id": GUILD_ID,
                "parent_id": GENERAL,
                "name": "a thread",
                "owner_id": USER_ID,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": _now(),
                    "locked": False,
                },
                "message_count": 0,
                "member_count": 1,
            },
            DM_CHANNEL: {"id": DM_CHANNEL, "type": 1, "recipients": [_user(USER_ID, "ana")]},
        }
        api = "/api/v10"
        self.app.get(f"{api}/users/@me")(self._me)
        self.app.get(f"{api}/oauth2/applications/@me")(self._application)
        self.app.get(f"{api}/gateway/bot")(self._gateway_bot)
        self.app.get(f"{api}/channels/{{channel_id}}")(self._channel)
        self.app.post(f"{api}/channels/{{channel_id}}/messages")(self._create_message)
        self.app.patch(f"{api}/channels/{{channel_id}}/messages/{{message_id}}")(self._edit_message)
        self.app.put(f"{api}/applications/{{application_id}}/commands")(self._overwrite_commands)
        self.app.post(f"{api}/interactions/{{interaction_id}}/{{token}}/callback")(self._callback)
        self.app.get("/attachments/{attachment_id}/{name}")(self._attachment)
        self.app.websocket("/gateway")(self._gateway)

    # ------------------------------------------------------------------ for tests

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    def bot_messages(self, channel_id: str | None = None) -> list[dict[str, Any]]:
        """The bot's messages as they are now, in the order posted."""
        return [
            m
            for m in self.messages.values()
            if m["author"]["id"] == BOT_ID and channel_id in (None, m["channel_id"])
        ]

    def user_message(
        self,
        text: str,
        *,
        channel_id: str = DM_CHANNEL,
        mention: bool = False,
        files: dict[str, bytes] | None = None,
        author: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A user writing `text` (with `files`) in a DM (default), the guild's channel or its
        thread; `mention` puts `<@bot>` in front, as the Discord client does. Dispatched as
        MESSAGE_CREATE to every live session; returns the message."""
        channel = self._channels[channel_id]
        guild = channel.get("guild_id")
        author = author or _user(USER_ID, "ana")
        message_id = snowflake()
        attachments = []
        for name, data in (files or {}).items():
            attachment_id = snowflake()
            self.attachments[attachment_id] = data
            url = f"http://127.0.0.1:{self.port}/attachments/{attachment_id}/{name}"
            attachments.append(
                {
                    "id": attachment_id,
                    "filename": name,
                    "size": len(data),
                    "url": url,
                    "proxy_url": url,
                    "content_type": "text/plain",
                }
            )
        message: dict[str, Any] = {
            "id": message_id,
            "channel_id": channel_id,
            "author": author,
            "content": f"<@{BOT_ID}> {text}" if mention else text,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [BOT_USER] if mention else [],
            "mention_roles": [],
            "attachments": attachments,
            "embeds": [],
            "pinned": False,
            "type": 0,
        }
        if guild:
            message["guild_id"] = guild
            message["member"] = {"roles": [], "joined_at": _now(), "deaf": False, "mute": False}
        self.messages[message_id] = message
        self.dispatch("MESSAGE_CREATE", message)
        return message

    def slash_command(
        self, name: str, text: str | None = None, *, channel_id: str = DM_CHANNEL
    ) -> dict[str, Any]:
        """A user invoking `/name [text]` (the one string option `text`): INTERACTION_CREATE."""
        channel = self._channels[channel_id]
        command = next((c for c in self.commands if c["name"] == name), None)
        if command is None:
            raise AssertionError(f"/{name} is not registered: {[c['name'] for c in self.commands]}")
        options = [{"name": "text", "type": 3, "value": text}] if text else []
        user = _user(USER_ID, "ana")
        interaction: dict[str, Any] = {
            "id": snowflake(),
            "application_id": APPLICATION_ID,
            "type": 2,
            "data": {"id": command["id"], "name": name, "type": 1, "options": options},
            "channel_id": channel_id,
            "channel": {k: v for k, v in channel.items() if k != "recipients"},
            "token": uuid.uuid4().hex,
            "version": 1,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD_ID} if channel.get("guild_id") else {"1": USER_ID},
            "context": 0 if channel.get("guild_id") else 1,
            "attachment_size_limit": MAX_FILE,
        }
        if channel.get("guild_id"):
            interaction["guild_id"] = channel["guild_id"]
            interaction["member"] = {
                "user": user,
                "roles": [],
                "joined_at": _now(),
                "deaf": False,
                "mute": False,
                "permissions": "2147483647",
            }
        else:
            interaction["user"] = user
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def new_thread(self, parent_id: str = GENERAL) -> str:
        """A thread someone started in `parent_id` (sessions are not told: as if made while the bot
        was away); returns its id."""
        thread_id = snowflake()
        self._channels[thread_id] = {**self._channels[THREAD], "id": thread_id, "parent_id": parent_id}
        return thread_id

    def dispatch(self, event: str, data: Any) -> None:
        """Send a DISPATCH (op 0) of `event` to every live session, as Discord does, and keep it
        for sessions that may resume."""
        now = time.monotonic()
        for session in self.sessions.values():
            if session.queue is None and session.resumable_until < now:
                continue
            if not self._wanted(session, event, data):
                continue
            session.seq += 1
            payload = {"op": 0, "t": event, "s": session.seq, "d": self._seen_by(session, event, data)}
            session.sent.append(payload)
            if session.queue is not None:
                session.queue.put_nowait(payload)

    def invalidate_sessions(self) -> None:
        """Sessions not connected now can no longer be resumed (as Discord drops one after a while):
        a RESUME of one is answered op 9 INVALID_SESSION with `d` false."""
        for session in self.sessions.values():
            if session.queue is None:
                session.resumable_until = 0.0

    def ask_to_reconnect(self) -> None:
        """Op 7 RECONNECT to every live connection: the client should resume."""
        for session in self.sessions.values():
            if session.queue is not None:
                session.queue.put_nowait({"op": 7, "d": None})

    # ------------------------------------------------------------------ gateway

    def _wanted(self, session: Session, event: str, data: Any) -> bool:
        if event != "MESSAGE_CREATE" or not isinstance(data, dict):
            return True
        return bool(session.intents & (GUILD_MESSAGES if data.get("guild_id") else DIRECT_MESSAGES))

    def _seen_by(self, session: Session, event: str, data: Any) -> Any:
        if event != "MESSAGE_CREATE" or not isinstance(data, dict) or session.intents & MESSAGE_CONTENT:
            return data
        mentioned = any(u.get("id") == BOT_ID for u in data.get("mentions") or [])
        if not data.get("guild_id") or mentioned or data.get("author", {}).get("id") == BOT_ID:
            return data
        return {**data, "content": "", "attachments": [], "embeds": []}

    async def _gateway(self, ws: WebSocket) -> None:
        await ws.accept()
        compress = ws.query_params.get("compress")
        zstd = zstandard.ZstdCompressor().compressobj() if compress == "zstd-stream" else None
        deflate = zlib.compressobj() if compress == "zlib-stream" else None
        lock = asyncio.Lock()

        async def send(payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            async with lock:
                if zstd is not None:
                    await ws.send_bytes(zstd.compress(raw) + zstd.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
                elif deflate is not None:
                    await ws.send_bytes(deflate.compress(raw) + deflate.flush(zlib.Z_SYNC_FLUSH))
                else:
                    await ws.send_text(raw.decode())

        session: Session | None = None
        pump: asyncio.Task[None] | None = None
        try:
            await send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}})
            while True:
                try:
                    frame = json.loads(await ws.receive_text())
                except WebSocketDisconnect:
                    return
                op, d = frame.get("op"), frame.get("d")
                self.record(f"gateway:{op}", frame)
                if op == 1:
                    await send({"op": 11})
                elif op == 2 and session is None:
                    if d.get("token") != self.token:
                        await ws.close(4004, "Authentication failed.")
                        return
                    intents = d.get("intents")
                    if not isinstance(intents, int):
                        await ws.close(4013, "Invalid intent(s).")
                        return
                    if intents & PRIVILEGED & ~(MESSAGE_CONTENT if self.message_content_granted else 0):
                        await ws.close(4014, "Disallowed intent(s).")
                        return
                    session = Session(id=uuid.uuid4().hex, intents=intents, queue=asyncio.Queue())
                    self.sessions[session.id] = session
                    self.identified += 1
                    self._went_live(+1)
                    await self._ready(send, session)
                    pump = asyncio.create_task(self._pump(session, send))
                elif op == 6 and session is None:
                    found = self.sessions.get(str(d.get("session_id")))
                    if (
                        d.get("token") != self.token
                        or found is None
                        or found.queue is not None
                        or found.resumable_until < time.monotonic()
                    ):
                        self.invalid_sessions_told += 1
                        self.changed()
                        await send({"op": 9, "d": False})
                        continue
                    session, session.queue = found, asyncio.Queue()
                    self.resumed += 1
                    self._went_live(+1)
                    for payload in [p for p in session.sent if p["s"] > int(d.get("seq") or 0)]:
                        await send(payload)
                    session.seq += 1
                    await send({"op": 0, "t": "RESUMED", "s": session.seq, "d": {}})
                    pump = asyncio.create_task(self._pump(session, send))
        finally:
            if pump is not None:
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
            if session is not None and session.queue is not None:
                session.queue = None
                session.resumable_until = time.monotonic() + 60
                self._went_live(-1)

    def _went_live(self, change: int) -> None:
        self.live += change
        self.most_live = max(self.most_live, self.live)
        self.changed()

    async def _pump(self, session: Session, send: Any) -> None:
        assert session.queue is not None
        queue = session.queue
        while (payload := await queue.get()) is not None:
            await send(payload)

    async def _ready(self, send: Any, session: Session) -> None:
        session.seq += 1
        ready = {
            "v": 10,
            "user": {**BOT_USER, "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": GUILD_ID, "unavailable": True}],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
            "application": {"id": APPLICATION_ID, "flags": 0},
            "private_channels": [],
        }
        await send({"op": 0, "t": "READY", "s": session.seq, "d": ready})
        session.seq += 1
        guild = {
            "id": GUILD_ID,
            "name": "Antler's guild",
            "icon": None,
            "owner_id": USER_ID,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": [
                {
                    "id": GUILD_ID,
                    "name": "@everyone",
                    "color": 0,
                    "hoist": False,
                    "position": 0,
                    "permissions": "1071698660929",
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "system_channel_flags": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "joined_at": _now(),
            "large": False,
            "unavailable": False,
            "member_count": 2,
            "members": [],
            "voice_states": [],
            "presences": [],
            "channels": [
                {**c, "permission_overwrites": []} for c in self._channels.values() if c["type"] == 0
            ],
            "threads": [c for c in self._channels.values() if c["type"] == 11],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }
        await send({"op": 0, "t": "GUILD_CREATE", "s": session.seq, "d": guild})

    # ------------------------------------------------------------------ REST

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bot {self.token}"

    async def _me(self, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        return BOT_USER

    async def _application(self, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        return {
            "id": APPLICATION_ID,
            "name": "Antler",
            "icon": None,
            "description": "",
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": _user(USER_ID, "ana"),
            "verify_key": "0" * 64,
            "team": None,
            "flags": 0,
            "bot": BOT_USER,
        }

    async def _gateway_bot(self, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
        return {"url": f"ws://127.0.0.1:{self.port}/gateway", "shards": 1, "session_start_limit": limit}

    async def _channel(self, channel_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        if channel_id not in self._channels:
            return _error(404, 10003, "Unknown Channel")
        return self._channels[channel_id]

    def _limited(self, route: str, channel_id: str) -> Response | None:
        """Discord's per-channel bucket for the message routes, and armed floods: a 429, or None."""
        key = self._bucket(route, channel_id)
        now = time.monotonic()
        window = [t for t in self._windows[key] if t > now - self.bucket_seconds]
        self._windows[key] = window
        armed = self.flood.refusal(route, channel_id)
        wait: float | None = None
        is_global = False
        if armed is not None:
            wait = float(armed)
            is_global = self.flood.refusal(route) is not None
        elif len(window) >= self.bucket_size:
            wait = round(window[0] + self.bucket_seconds - now, 3)
        if wait is None:
            window.append(now)
            return None
        self.refused.append((route, channel_id))
        self.record(f"{route}:429", {"channel_id": channel_id})
        body = {"message": "You are being rate limited.", "retry_after": wait, "global": is_global}
        headers = {
            "Retry-After": str(max(1, int(wait + 0.999))),
            "X-RateLimit-Scope": "global" if is_global else "user",
            "Via": "1.1 google",
        }
        if not is_global:
            headers.update(self._bucket_headers(key, remaining=0, reset_after=wait))
        return JSONResponse(body, 429, headers=headers)

    def _bucket(self, route: str, channel_id: str) -> tuple[str, str]:
        return ("messages" if self.shared_bucket else route, channel_id)

    def _bucket_headers(
        self, key: tuple[str, str], *, remaining: int | None = None, reset_after: float | None = None
    ) -> dict[str, str]:
        window = self._windows[key]
        if remaining is None:
            remaining = max(0, self.bucket_size - len(window))
        if reset_after is None:
            reset_after = max(0.0, window[0] + self.bucket_seconds - time.monotonic()) if window else 0.0
        return {
            "X-RateLimit-Limit": str(self.bucket_size),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": f"messages-{key[0]}",
        }

    async def _create_message(self, channel_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        if channel_id not in self._channels:
            return _error(404, 10003, "Unknown Channel")
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            payload = json.loads(str(form.get("payload_json") or "{}"))
            uploads = [
                (value.filename or "file", await value.read())
                for key, value in form.multi_items()
                if key.startswith("files[") and hasattr(value, "read")
            ]
        else:
            payload, uploads = await request.json(), []
        if (refusal := self._limited("createMessage", channel_id)) is not None:
            return refusal
        content = str(payload.get("content") or "")
        if len(content) > MAX_CONTENT:
            self.record("createMessage:400", payload)
            return _error(400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
        if any(len(data) > MAX_FILE for _, data in uploads):
            self.record("createMessage:413", payload)
            return _error(413, 40005, "Request entity too large")
        if not content and not uploads:
            return _error(400, 50006, "Cannot send an empty message")
        message = {
            "id": snowflake(),
            "channel_id": channel_id,
            "author": BOT_USER,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [
                {"id": snowflake(), "filename": name, "size": len(data), "url": "", "proxy_url": ""}
                for name, data in uploads
            ],
            "embeds": [],
            "pinned": False,
            "type": 19 if payload.get("message_reference") else 0,
            "edits": [],
            "files": dict(uploads),
            "allowed_mentions": payload.get("allowed_mentions"),
            "message_reference": payload.get("message_reference"),
        }
        self.messages[message["id"]] = message
        self.record("createMessage", {"channel_id": channel_id, **payload, "id": message["id"]})
        headers = self._bucket_headers(self._bucket("createMessage", channel_id))
        return JSONResponse(_public(message), headers=headers)

    async def _edit_message(self, channel_id: str, message_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        message = self.messages.get(message_id)
        if message is None or message["channel_id"] != channel_id:
            return _error(404, 10008, "Unknown Message")
        payload = await request.json()
        if (refusal := self._limited("editMessage", channel_id)) is not None:
            return refusal
        if message["author"]["id"] != BOT_ID:
            return _error(403, 50005, "Cannot edit a message authored by another user")
        content = str(payload.get("content") or "")
        if len(content) > MAX_CONTENT:
            self.record("editMessage:400", payload)
            return _error(400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
        message["content"] = content
        message["edited_timestamp"] = _now()
        message["edits"].append(content)
        self.record("editMessage", {"channel_id": channel_id, "message_id": message_id, **payload})
        return JSONResponse(
            _public(message), headers=self._bucket_headers(self._bucket("editMessage", channel_id))
        )

    async def _overwrite_commands(self, application_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return _error(401, 0, "401: Unauthorized")
        if application_id != APPLICATION_ID:
            return _error(404, 10002, "Unknown Application")
        commands = await request.json()
        for command in commands:
            name, about = str(command.get("name", "")), str(command.get("description", ""))
            if not (1 <= len(name) <= 32 and name == name.lower() and 1 <= len(about) <= 100):
                return _error(400, 50035, f"Invalid Form Body: command {name!r}")
        if len(commands) > 100:
            return _error(400, 30032, "Maximum number of application commands reached (100)")
        self.commands = [
            {**c, "id": snowflake(), "application_id": APPLICATION_ID, "version": snowflake(), "type": 1}
            for c in commands
        ]
        self.record("overwriteCommands", {"commands": commands})
        return self.commands

    async def _callback(self, interaction_id: str, token: str, request: Request) -> Any:
        body = await request.json()
        self.record("interactionCallback", {"interaction_id": interaction_id, **body})
        if request.query_params.get("with_response") in ("true", "True", "1"):
            return {"interaction": {"id": interaction_id, "type": 2}, "resource": None}
        return Response(status_code=204)

    async def _attachment(self, attachment_id: str, name: str) -> Any:
        if attachment_id not in self.attachments:
            return Response(status_code=404)
        return Response(self.attachments[attachment_id], media_type="application/octet-stream")


def _public(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("edits", "files", "allowed_mentions")}


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message, "code": code}, status)
