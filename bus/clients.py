"""NATS users for clients that are not Antler's components nor its admin: scripts and agent-protocol callers.

`antler creds --channel <name>` mints a user for one script channel: it may publish only
`<prefix>.chat.in.<name>` and `<prefix>.chat.in.<name>.*` (messages in, as an adapter would) and read only
`<prefix>.chat.out.<name>` (the replies), through its own inbox (`_INBOX_<prefix>-client-<label>`),
so it sees no other channel, no run, no bucket. `antler creds --agent-owner <owner>` mints one for
NATS agent protocol clients (`agentproto/`) acting for one owner: prompts and status requests only
on `agents.{prompt,status}.*.<owner>.*`, answers to the host's questions only on that owner's query
subjects, discovery (`$SRV.*.agents`), heartbeats and the SDK's `_INBOX.agents.>` replies.

What one NATS account cannot hide: discovery and heartbeats announce every agent, owner and session
*name* to any caller, and the client SDK's reply inboxes (`_INBOX.agents.<random>`) are one subject
space, so a caller subscribing to all of it could read another caller's streamed answer (the
inbox names are random, but not secret from a wildcard). Owners who must not see each other at all
belong in NATS accounts of their own (docs/notes-proto.md).

Minted users are saved in `<data_dir>/nats-clients.json` (owner-readable only): minting the same
scope again gives the same credentials, and `antler up` includes them in the embedded server's
users (`embedded_authorization`), reloading a running server when one is minted.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bus.permissions import USERS_FILE, NatsUser, inbox_prefix, save_users, server_block, users_for
from bus.subjects import Subjects

CLIENTS_FILE = "nats-clients.json"
ClientKind = Literal["channel", "agents"]
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# The agent protocol's subjects are not under our prefix: the protocol fixes them (`agents.<verb>...`).
PROTOCOL_PROMPT = "agents.prompt"
PROTOCOL_STATUS = "agents.status"
PROTOCOL_HEARTBEAT = "agents.hb"
SDK_INBOX = "_INBOX.agents"  # the client SDK's reply subjects (not configurable in the SDK)
OWNERS_KEY = "agentproto.owners"  # settings keys `agentproto.owners.<owner>`: owners the agent hosts serve
_OWNER_TOKEN = re.compile(r"^[a-z0-9_-]{1,64}$")  # the protocol's owner token (lower case)


class InvalidScope(ValueError):
    """A channel or owner name that is not one NATS subject token."""


@dataclass(frozen=True)
class ClientUser:
    kind: ClientKind
    scope: str  # the channel, or the owner
    user: str
    password: str

    def inbox_prefix(self, subjects: Subjects) -> str:
        return inbox_prefix(subjects, f"client-{self.kind}-{self.scope}")


def check_scope(scope: str) -> str:
    """`scope` if it is one subject token (letters, digits, '-', '_'; at most 64).

    Raises:
        InvalidScope: it is not.
    """
    if not _TOKEN.match(scope):
        raise InvalidScope(
            f"{scope!r} is not a valid name here: use letters, digits, '-' and '_' only (at most 64)"
        )
    return scope


def owner_key(owner: str) -> str:
    """The settings key that has the agent hosts (`agentproto`) serve `owner`'s agents."""
    return f"{OWNERS_KEY}.{owner}"


def query_subject_prefix(subjects: Subjects, owner: str) -> str:
    """Where the agent-protocol host (`agentproto`) takes answers to its questions for `owner`."""
    return f"{inbox_prefix(subjects, 'agentproto')}.query.{owner}"


def client_permissions(kind: ClientKind, scope: str, subjects: Subjects) -> dict[str, object]:
    """The NATS permissions of a client user of `kind` for `scope` (a channel, or an owner)."""
    inbox = inbox_prefix(subjects, f"client-{kind}-{scope}")
    if kind == "channel":
        # Its chats' routed subjects with their partition (what `antler send` publishes:
        # `bus.chat_partitions.publish_inbound`), without it (clients of earlier versions) and the bare
        # one (raw scripts); and the chat streams' configuration, where the partition count is kept.
        channel = subjects.chat_in_channel(scope)
        publish = [
            channel,
            f"{channel}.*",
            f"{channel}.*.*",
            f"$JS.API.STREAM.INFO.{subjects.chat_in_partition_stream(0)}",
            f"$JS.API.STREAM.INFO.{subjects.unsplit_chat_in_stream}",
        ]
        subscribe = [subjects.chat_out(scope), f"{inbox}.>"]
    else:
        publish = [
            f"{PROTOCOL_PROMPT}.*.{scope}.*",
            f"{PROTOCOL_STATUS}.*.{scope}.*",
            f"{query_subject_prefix(subjects, scope)}.*",
            # Discovery (`Agents.discover`, `Agents.ping`): the `agents` service only.
            "$SRV.INFO.agents",
            "$SRV.INFO.agents.*",
            "$SRV.PING.agents",
            "$SRV.PING.agents.*",
        ]
        # The SDK's tracker subscribes to every heartbeat (`agents.hb.*.*.*`); they carry names only,
        # which discovery shows anyway.
        subscribe = [f"{SDK_INBOX}.>", f"{PROTOCOL_HEARTBEAT}.*.*.*", f"{inbox}.>"]
    return {"publish": {"allow": publish}, "subscribe": {"allow": subscribe}}


def _load(path: Path) -> dict[str, dict[str, str]]:
    try:
        data: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return data


def _save(path: Path, data: dict[str, dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)


def saved_clients(path: Path) -> list[ClientUser]:
    """The client users saved at `path` (none if there is no file)."""
    return [
        ClientUser(entry["kind"], entry["scope"], entry["user"], entry["password"])  # type: ignore[arg-type]  # read back as save_clients wrote it
        for entry in _load(path).values()
    ]


def mint(subjects: Subjects, path: Path, kind: ClientKind, scope: str) -> ClientUser:
    """The user for `kind`/`scope`: the saved one, else a new one saved at `path`.

    Raises:
        InvalidScope: `scope` is not one subject token.
    """
    check_scope(scope)
    if kind == "agents" and not _OWNER_TOKEN.match(scope):
        raise InvalidScope(
            f"{scope!r} is not an owner the agent protocol allows: lower case letters, digits, '-', '_'"
        )
    data = _load(path)
    key = f"{kind}:{scope}"
    if key not in data:
        data[key] = {
            "kind": kind,
            "scope": scope,
            "user": f"{subjects.service_name('client')}-{kind}-{scope}",
            "password": secrets.token_urlsafe(24),
        }
        _save(path, data)
    entry = data[key]
    return ClientUser(kind, scope, entry["user"], entry["password"])


def client_nats_users(subjects: Subjects, path: Path) -> list[NatsUser]:
    """The saved client users as entries of a server's authorization block."""
    return [
        NatsUser(
            f"client:{c.kind}:{c.scope}", c.user, c.password, client_permissions(c.kind, c.scope, subjects)
        )
        for c in saved_clients(path)
    ]


def embedded_authorization(subjects: Subjects, data_dir: Path) -> str:
    """The embedded server's users: the components' and the admin (saved; new ones added), the clients'."""
    users = users_for(subjects, data_dir / USERS_FILE)
    save_users(data_dir / USERS_FILE, users)
    return server_block(users + client_nats_users(subjects, data_dir / CLIENTS_FILE))


def context(client: ClientUser, subjects: Subjects, url: str | None) -> dict[str, Any]:
    """A `nats` CLI context (`~/.config/nats/context/<name>.json`) for this user, which `antler send
    --creds` reads too; `antler` says what it is for (prefix and channel or owner)."""
    data: dict[str, Any] = {
        "description": f"Antler ({subjects.prefix}): {client.kind} {client.scope}",
        "url": url or "",
        "user": client.user,
        "password": client.password,
        "inbox_prefix": client.inbox_prefix(subjects),
        "antler": {"prefix": subjects.prefix, client.kind: client.scope},
    }
    return data
