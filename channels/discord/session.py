"""The gateway session kept on the bus, so that a standby copy RESUMEs it instead of starting anew.

Discord allows one gateway session per shard, and a new session (IDENTIFY) does not receive what
was sent while no copy was connected. A session that dropped can be resumed for a while (op 6
RESUME with its id and the last sequence number seen, at its `resume_gateway_url`): Discord then
replays the dispatches after that sequence number and says RESUMED. So the active copy keeps its
session id, sequence number and resume URL in KV (`<prefix>_replies`, key `discord.session`,
written at most every `SAVE_EVERY` seconds while they change), and a copy that becomes active
resumes that session (`resume_stored`): the messages sent during the switch arrive, replayed. A
sequence number saved a moment before the old copy died only replays a few events it had taken
already; the bus drops those (each message's id is its dedupe id). When Discord answers op 9
INVALID_SESSION (the session is gone: too old, or closed), discord.py identifies afresh.

discord.py resumes only a session of its own (after a drop); the first connection of a client
always identifies. `resume_stored` has its first connection resume the stored session instead
(`_ResumingWebSocket`, discord.py's gateway socket whose `from_client` is given the session):
this process runs one Discord client.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Self

import discord
import discord.client
import yarl
from discord.gateway import DiscordWebSocket
from nats.js.errors import KeyNotFoundError
from pydantic import BaseModel, ValidationError

from bus import Bus

log = logging.getLogger(__name__)

KEY = "discord.session"
SAVE_EVERY = 1.0  # seconds between saves of a changing sequence number
RESUMABLE_SECONDS = 600.0  # an older session is not tried: Discord keeps a dropped one for minutes


class StoredSession(BaseModel):
    session_id: str
    sequence: int
    resume_url: str
    saved_at: float  # epoch seconds


async def load(bus: Bus) -> StoredSession | None:
    """The session the last active copy kept, if it is recent enough to be worth resuming."""
    try:
        entry = await (await bus.kv(bus.subjects.replies_bucket)).get(KEY)
    except KeyNotFoundError:
        return None
    except Exception as exc:  # the bus away a moment: a new session then, rather than none
        log.warning("discord: could not read the stored gateway session; identifying: %s", exc)
        return None
    try:
        stored = StoredSession.model_validate_json(entry.value or b"")
    except ValidationError as exc:
        log.warning("discord: the stored gateway session is unreadable; identifying: %s", exc)
        return None
    if time.time() - stored.saved_at > RESUMABLE_SECONDS:
        return None
    return stored


async def keep_saved(bus: Bus, client: discord.Client) -> None:
    """Until cancelled: the live connection's session id, sequence number and resume URL, saved
    whenever they changed (at most every `SAVE_EVERY` seconds)."""
    kv = await bus.kv(bus.subjects.replies_bucket)
    saved: tuple[str, int, str] | None = None
    while True:
        ws = client.ws
        if ws is not None and ws.session_id and ws.sequence is not None:
            now = (str(ws.session_id), int(ws.sequence), str(ws.gateway))
            if now != saved:
                stored = StoredSession(
                    session_id=now[0], sequence=now[1], resume_url=now[2], saved_at=time.time()
                )
                try:
                    await kv.put(KEY, stored.model_dump_json().encode())
                    saved = now
                except Exception as exc:  # the bus away for a moment: saved next time
                    log.warning("discord: could not save the gateway session: %s", exc)
        await asyncio.sleep(SAVE_EVERY)


_pending: dict[int, StoredSession] = {}  # id(client) -> the session its first connection resumes


class _ResumingWebSocket(DiscordWebSocket):
    """discord.py's gateway socket; a client's first connection resumes a stored session."""

    @classmethod
    async def from_client(
        cls,
        client: discord.Client,
        *,
        initial: bool = False,
        gateway: yarl.URL | None = None,
        shard_id: int | None = None,
        session: str | None = None,
        sequence: int | None = None,
        resume: bool = False,
        encoding: str = "json",
        compress: bool = True,
    ) -> Self:
        stored = _pending.pop(id(client), None)
        if stored is not None and initial:
            log.info("discord: resuming session %s from sequence %d", stored.session_id, stored.sequence)
            resume, session, sequence = True, stored.session_id, stored.sequence
            gateway = yarl.URL(stored.resume_url)
        return await super().from_client(
            client,
            initial=initial,
            gateway=gateway,
            shard_id=shard_id,
            session=session,
            sequence=sequence,
            resume=resume,
            encoding=encoding,
            compress=compress,
        )


def resume_stored(client: discord.Client, stored: StoredSession) -> None:
    """Have `client`'s first gateway connection RESUME `stored` instead of identifying."""
    _pending[id(client)] = stored
    discord.client.DiscordWebSocket = _ResumingWebSocket  # type: ignore[misc]
