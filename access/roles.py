"""People's roles and linked chat users, in KV `<prefix>_access` (every gateway, router and runner sees
the same, so a change takes effect at the next run without restarts).

Keys (user ids are digested: they may hold characters KV keys cannot):
- `role.<digest>`: `{user_id, role, source}`, a role an admin or the identity provider gave;
- `link.<digest of chat user>`: `{chat_user, user_id}`, a chat user (`telegram:42`) who is that account;
- `code.<code>`: `{chat_user}`, a `/connect` code, removed when redeemed or after its TTL.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from bus import Bus

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:40]


class RoleBook:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, bus: Bus) -> RoleBook:
        return cls(await bus.js.key_value(bus.subjects.bucket("access")))

    async def _get(self, key: str) -> dict[str, Any] | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None
        try:
            found = json.loads(entry.value)
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    # -- roles ------------------------------------------------------------
    async def role_of(self, user_id: str) -> str | None:
        """The role assigned to `user_id` (an account's, or a token's user), None when none is."""
        found = await self._get(f"role.{_digest(user_id)}")
        role = found.get("role") if found else None
        return role if isinstance(role, str) else None

    async def assign(self, user_id: str, role: str, *, source: str) -> None:
        record = {"user_id": user_id, "role": role, "source": source}
        await self.kv.put(f"role.{_digest(user_id)}", json.dumps(record).encode())

    # -- chat users linked to accounts -----------------------------------
    async def linked_user(self, chat_user: str) -> str | None:
        """The account user id a chat user (`<channel>:<platform user>`) was linked to."""
        found = await self._get(f"link.{_digest(chat_user)}")
        user_id = found.get("user_id") if found else None
        return user_id if isinstance(user_id, str) else None

    async def link(self, chat_user: str, user_id: str) -> None:
        record = {"chat_user": chat_user, "user_id": user_id}
        await self.kv.put(f"link.{_digest(chat_user)}", json.dumps(record).encode())

    async def new_code(self, chat_user: str, ttl_seconds: float) -> str:
        """A one-time code that links `chat_user` to whichever signed-in account redeems it in time."""
        for _ in range(5):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))
            try:
                await self.kv.create(
                    f"code.{code}", json.dumps({"chat_user": chat_user}).encode(), msg_ttl=ttl_seconds
                )
            except KeyWrongLastSequenceError:
                continue
            return f"{code[:4]}-{code[4:]}"
        raise RuntimeError("could not make a unique /connect code")

    async def redeem(self, code: str) -> str | None:
        """The chat user a code was made for, once: the code is gone afterwards (None: unknown, used
        or expired)."""
        normalized = "".join(c for c in code.upper() if c.isalnum())
        if len(normalized) != 8 or any(c not in CODE_ALPHABET for c in normalized):
            return None
        key = f"code.{normalized}"
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        if not entry.value or entry.revision is None:
            return None
        try:
            await self.kv.delete(key, last=entry.revision)  # only one redeemer wins
        except KeyWrongLastSequenceError:
            return None
        found = json.loads(entry.value)
        chat_user = found.get("chat_user") if isinstance(found, dict) else None
        return chat_user if isinstance(chat_user, str) else None


async def profile_text(book: RoleBook, user_id: str) -> str | None:
    """The person's own words about themselves (DeerFlow's USER.md), None when never written."""
    found = await book._get(f"profile.{_digest(user_id)}")
    content = found.get("content") if found else None
    return content if isinstance(content, str) and content else None


async def set_profile_text(book: RoleBook, user_id: str, content: str) -> None:
    record = {"user_id": user_id, "content": content}
    await book.kv.put(f"profile.{_digest(user_id)}", json.dumps(record).encode())
