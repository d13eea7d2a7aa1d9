"""Login rate limiting: failed sign-ins counted on the bus, so every gateway process sees them.

Failures are counted per account (e-mail address, normalised as the account store keys it, so
`carol@ｅxample.com` with a fullwidth letter counts against carol@example.com) and per client address in
KV `<prefix>_login_failures`. After `max_failures` of either, sign-ins for it
are refused (429) until `lockout_seconds` have passed since the last failure;
a successful sign-in clears the account's count and the address's.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError
from pydantic import BaseModel

from bus import Bus
from bus.records import RecordStore, drop_keys
from gateway.accounts.errors import InvalidAccount
from gateway.accounts.store import normalize_email

DAY = 86_400.0


class Failures(BaseModel):
    count: int = 0
    last: float = 0.0


def _key(kind: str, value: str) -> str:
    return f"{kind}.{hashlib.sha256(value.encode()).hexdigest()[:40]}"


@dataclass(eq=False)
class LoginLockout:
    bus: Bus
    bucket: str
    store: RecordStore[Failures]
    max_failures: int
    lockout_seconds: float

    @classmethod
    async def open(cls, bus: Bus, max_failures: int, lockout_seconds: float) -> LoginLockout:
        bucket = bus.subjects.bucket("login_failures")
        try:
            kv = await bus.js.key_value(bucket)
        except BucketNotFoundError:  # entries go after a day at the latest (lockouts are minutes)
            kv = await bus.js.create_key_value(
                KeyValueConfig(
                    bucket=bucket, history=1, storage=StorageType.FILE, ttl=max(DAY, lockout_seconds)
                )
            )
        return cls(bus, bucket, RecordStore(kv, Failures), max_failures, lockout_seconds)

    @staticmethod
    def keys(email: str, address: str) -> list[str]:
        """The counters a sign-in as `email` from `address` adds to: the account's is keyed on the
        address as `AccountStore` normalises it (every spelling of one account shares a count)."""
        try:
            account = normalize_email(email)
        except InvalidAccount:  # no account can have it; still counted, so guesses cost the same
            account = email.strip().lower()
        return [_key("acct", account), _key("addr", address)]

    def _current(self, found: Failures | None, now: float) -> int:
        if found is None or now - found.last >= self.lockout_seconds:
            return 0
        return found.count

    async def locked(self, keys: list[str]) -> bool:
        now = time.time()
        for key in keys:
            if self._current(await self.store.get(key), now) >= self.max_failures:
                return True
        return False

    async def failed(self, keys: list[str]) -> None:
        now = time.time()
        for key in keys:

            def counted(found: Failures | None) -> Failures:
                return Failures(count=self._current(found, now) + 1, last=now)

            await self.store.update(key, counted)

    async def succeeded(self, keys: list[str]) -> None:
        for key in keys:
            await drop_keys(self.bus.js, self.bucket, key)
