"""Typed records in KV buckets, with compare-and-set updates.

Several processes write the same keys (runners, the gateway, the router), so
changes go through `update()`: read, change, write only if nobody wrote in
between, else read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from pydantic import BaseModel

from bus.messages import decode, encode

T = TypeVar("T", bound=BaseModel)


class RecordStore(Generic[T]):
    """One KV bucket holding one envelope type, keyed by id."""

    def __init__(self, kv: KeyValue, model: type[T]) -> None:
        self.kv = kv
        self.model = model

    async def get(self, key: str) -> T | None:
        found = await self.get_with_revision(key)
        return found[0] if found else None

    async def get_with_revision(self, key: str) -> tuple[T, int] | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        if entry.value is None or entry.revision is None:
            return None
        return decode(self.model, entry.value), entry.revision

    async def put(self, key: str, record: T) -> int:
        return await self.kv.put(key, encode(record))

    async def create(self, key: str, record: T) -> bool:
        """Write only if the key does not exist; False when it did."""
        try:
            await self.kv.create(key, encode(record))
        except KeyWrongLastSequenceError:
            return False
        return True

    async def delete(self, key: str) -> None:
        try:
            await self.kv.delete(key)
        except KeyNotFoundError:
            pass

    async def update(
        self,
        key: str,
        change: Callable[[T | None], T | None] | Callable[[T | None], Awaitable[T | None]],
        *,
        known: tuple[T, int] | None = None,
    ) -> T | None:
        """Apply `change` atomically; it gets the current record (or None) and returns the new one.

        Returning None leaves the record untouched. Returns what was written (or the
        unchanged current record).
        """
        found = await self.update_with_revision(key, change, known=known)
        return found[0] if found else None

    async def update_with_revision(
        self,
        key: str,
        change: Callable[[T | None], T | None] | Callable[[T | None], Awaitable[T | None]],
        *,
        known: tuple[T, int] | None = None,
        attempts: int = 50,
    ) -> tuple[T, int] | None:
        """`update()`, also returning the record's revision afterwards (None: no record).

        `known` (record, revision) saves the first read when the caller has just seen
        or written the record; a stale guess only costs one retry.
        """
        for attempt in range(attempts):
            if known is not None and attempt == 0:
                current, revision = known
            else:
                found = await self.get_with_revision(key)
                current, revision = found if found else (None, 0)
            result = change(current)
            new = await result if asyncio.iscoroutine(result) else result
            if new is None:
                return (current, revision) if current is not None else None
            try:
                if revision:
                    written = await self.kv.update(key, encode(new), last=revision)
                else:
                    written = await self.kv.create(key, encode(new))
                return new, written  # type: ignore[return-value]
            except KeyWrongLastSequenceError:
                await asyncio.sleep(min(0.002 * (attempt + 1), 0.05))
        raise RuntimeError(f"could not update {key!r}: too many concurrent writers")

    async def keys(self) -> list[str]:
        """Every key (reads the whole bucket's index: for rare work, never per request)."""
        return await keys_matching(self.kv, ">")


async def keys_matching(kv: KeyValue, pattern: str) -> list[str]:
    """The keys matching a subject pattern (`thread1.*`), oldest write first, filtered by the server:
    the cost follows the number of matches, not the size of the bucket."""
    watcher = await kv.watch(pattern, meta_only=True, ignore_deletes=True)
    found: list[str] = []
    try:
        async for entry in watcher:
            if entry is None:  # the end of what is stored now
                break
            found.append(entry.key)
            if entry.delta == 0:
                break
    finally:
        await watcher.stop()
    return found
