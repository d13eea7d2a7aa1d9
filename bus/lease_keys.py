"""Keys held by compare-and-set with a per-message TTL: the protocol under every lease on the bus.

A key of a KV bucket is written with `Nats-Expected-Last-Subject-Sequence` (the revision the writer
last saw, 0 for a key with no entry) and a per-message TTL (nats-server 2.11+). Two writers never
both win a revision; a writer that stops renewing loses the key when the TTL runs out, and the
server leaves a marker (the bucket's `limit_marker_ttl`) every watcher sees. Giving a key back is a
delete marker written the same way, so a key that lapsed and was taken meanwhile is left alone.

Built on it: `bus.leases` (routers' partitions, adapters' single connections) and the model
budget's slots and tickets (`llm.budget`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from bus.connection import Bus

log = logging.getLogger(__name__)

EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
# The marker a released key leaves: kept long enough for every watcher to see it.
MARKER_TTL = 60
RELEASE_TIMEOUT = 1.0  # seconds a release waits for the server's acknowledgement: it lapses anyway
CLAIM_TRIES = 3


def conflict(exc: BaseException) -> bool:
    """The server refused a write because the key's last revision was not the one expected."""
    return isinstance(exc, KeyWrongLastSequenceError) or getattr(exc, "err_code", None) in (10071, 10164)


@dataclass
class KeyEntry:
    """A key's last entry: its revision, its value, and whether it is live (not a marker)."""

    revision: int
    value: bytes
    live: bool


class LeaseKeys:
    """Compare-and-set writes with a TTL on one KV bucket; `open()` first.

    Args:
        bus: the connection.
        bucket: the KV bucket's full name (made with `limit_marker_ttl` by `bus.provision`).
        ttl: seconds a write outlives itself unless written again.
        patient: writes wait out a JetStream that is briefly unavailable (`Bus.while_unavailable`),
            as a model call does; a lease's holder instead decides by `Lease.fresh`.
    """

    def __init__(self, bus: Bus, bucket: str, ttl: float, *, patient: bool = False) -> None:
        self.bus = bus
        self.bucket = bucket
        self.ttl = ttl
        self.patient = patient
        self.kv: Any = None
        self._subject_prefix = f"$KV.{bucket}."

    async def open(self) -> None:
        self.kv = await self.bus.kv(self.bucket)

    async def write(self, key: str, value: bytes, last: int, ttl: float | None = None) -> int:
        """Write `value` if the key's last revision is `last` (0: it has none); its new revision.

        Raises:
            KeyWrongLastSequenceError: it is not (someone else wrote the key meanwhile).
            Exception: the bus is away.
        """
        headers = {EXPECTED_LAST: str(last)}

        async def publish() -> Any:
            return await self.bus.js.publish(
                self._subject_prefix + key, value, headers=headers, msg_ttl=ttl or self.ttl
            )

        try:
            if self.patient:
                ack = await self.bus.while_unavailable(f"{self.bucket} {key}", publish)
            else:
                ack = await publish()
        except Exception as exc:
            if conflict(exc):
                raise KeyWrongLastSequenceError(description=str(exc)) from None
            raise
        return int(ack.seq)

    async def current(self, key: str) -> KeyEntry | None:
        """The key's last entry (a marker: not live, empty); None if it has none."""
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError as exc:  # deleted (a marker) or never written
            found = getattr(exc, "entry", None)
            return KeyEntry(found.revision, b"", False) if found is not None and found.revision else None
        value = entry.value or b""
        return KeyEntry(entry.revision or 0, value, bool(value) and entry.operation is None)

    async def claim(
        self,
        key: str,
        value: bytes,
        last: int = 0,
        *,
        mine: Callable[[bytes], bool] = lambda _value: False,
        seen: Callable[[str, KeyEntry | None], None] | None = None,
    ) -> int | None:
        """Write `value` to `key` unless someone else holds it; the revision written, else None.

        `last` is the revision the caller believes the key has; a key that turns out to hold a
        marker (lapsed or released), nothing, or a value `mine` accepts (this holder's own) is
        taken over. `seen` is told each entry read on the way (a view kept up to date).
        """
        for _ in range(CLAIM_TRIES):
            try:
                return await self.write(key, value, last)
            except KeyWrongLastSequenceError:
                current = await self.current(key)
                if seen is not None:
                    seen(key, current)
                if current is None:
                    last = 0  # its marker expired meanwhile: the key is empty
                    continue
                if current.live and not mine(current.value):
                    return None  # held by someone else
                last = current.revision
        return None

    async def release(self, key: str, revision: int, what: str = "lease") -> bool:
        """Give `key` back at once (a delete marker), if its last revision is still `revision`;
        whether it was given back. Never raises: a key not given back lapses by itself."""
        try:
            await self.bus.js.publish(
                self._subject_prefix + key,
                b"",
                headers={EXPECTED_LAST: str(revision), "KV-Operation": "DEL"},
                msg_ttl=MARKER_TTL,
                timeout=RELEASE_TIMEOUT,
            )
        except Exception as exc:
            if not conflict(exc):  # a conflict: it lapsed and is someone else's now
                log.warning("could not give back %s %s (%s); it lapses by itself", what, key, exc)
            return False
        return True
