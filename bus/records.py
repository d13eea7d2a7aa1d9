"""Typed records in KV buckets, with compare-and-set updates.

Several processes write the same keys (runners, the gateway, the router), so
changes go through `update()`: read, change, write only if nobody wrote in
between, else read again.

A record that no longer validates (written by a newer Antler, or edited by
hand) raises `EnvelopeError` when read, unless its store was given a `repair`:
then the reader gets what can still be read of it (`salvage`), and the next
`update()` writes that back in its place.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

from nats.js.client import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ValidationError

from bus.errors import EnvelopeError
from bus.messages import decode, encode
from bus.split_kv import bucket_names

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)


def salvage(model: type[T], raw: bytes, base: T, fixed: Iterable[str] = ()) -> T:
    """What can still be read of a stored record that fails validation: `base`, with each of the
    stored fields that is valid on its own laid over it (the others keep `base`'s values).

    Args:
        model: the record's envelope.
        raw: the stored bytes (not JSON at all: `base` as it is).
        base: the record to start from (its key's id, defaults).
        fixed: fields whose value is `base`'s whatever was stored (the id the key names).
    """
    try:
        stored: Any = json.loads(raw)
    except ValueError:
        stored = None
    if not isinstance(stored, dict):
        return base
    kept: dict[str, Any] = base.model_dump()
    names = {field.alias or name: name for name, field in model.model_fields.items()}
    names.update((name, name) for name in model.model_fields)
    for key, value in stored.items():
        name = names.get(key)
        if name is None or name in fixed:
            continue
        try:
            model.model_validate({**kept, name: value})
        except ValidationError:
            continue  # this field is what made the record unreadable: it keeps base's value
        kept[name] = value
    return model.model_validate(kept)


def repair_by_key(model: type[T], id_field: str) -> Callable[[str, bytes], T]:
    """A `repair` for records kept under their own id (`id_field`, a thread's `thread_id`): `salvage`
    over a record with only that id (the rest at its defaults)."""

    def repair(key: str, stored: bytes) -> T:
        return salvage(model, stored, model.model_validate({id_field: key}), fixed=(id_field,))

    return repair


class RecordStore(Generic[T]):
    """One KV bucket holding one envelope type, keyed by id.

    Args:
        kv: the bucket.
        model: the envelope its records are.
        repair: `(key, stored bytes) -> record`, for a record that fails validation (`salvage`
            helps); without it, reading such a record raises `EnvelopeError`.
    """

    def __init__(self, kv: KeyValue, model: type[T], repair: Callable[[str, bytes], T] | None = None) -> None:
        self.kv = kv
        self.model = model
        self.repair = repair

    async def get(self, key: str) -> T | None:
        found = await self.get_with_revision(key)
        return found[0] if found else None

    async def get_with_revision(self, key: str) -> tuple[T, int] | None:
        found = await self._read(key)
        return found[:2] if found else None

    async def _read(self, key: str) -> tuple[T, int, bool] | None:
        """(record, revision, whether it was repaired), or None when there is none."""
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        if entry.value is None or entry.revision is None:
            return None
        try:
            return decode(self.model, entry.value), entry.revision, False
        except EnvelopeError as exc:
            if self.repair is None:
                raise
            log.warning("%s %s cannot be read (%s): going on with what can", self.model.__name__, key, exc)
            return self.repair(key, entry.value), entry.revision, True

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
        known: tuple[T | None, int] | None = None,
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
        known: tuple[T | None, int] | None = None,
        attempts: int = 50,
    ) -> tuple[T, int] | None:
        """`update()`, also returning the record's revision afterwards (None: no record).

        `known` (record, revision) saves the first read when the caller has just seen
        or written the record, `(None, 0)` when it has just seen there is none; a stale guess
        only costs one retry. A repaired record
        is written back even when `change` leaves it as it is: readable from then on.
        """
        for attempt in range(attempts):
            repaired = False
            current: T | None
            if known is not None and attempt == 0:
                current, revision = known
            else:
                found = await self._read(key)
                current, revision, repaired = found if found else (None, 0, False)
            result = change(current)
            new: T | None = await result if inspect.isawaitable(result) else result
            if new is None and repaired:
                new = current
            if new is None:
                return (current, revision) if current is not None else None
            try:
                if revision:
                    written = await self.kv.update(key, encode(new), last=revision)
                else:
                    written = await self.kv.create(key, encode(new))
                return new, written
            except KeyWrongLastSequenceError:
                if not (known is not None and attempt == 0):  # (a stale guess: read and try again now)
                    await asyncio.sleep(min(0.002 * (attempt + 1), 0.05))
        raise RuntimeError(f"could not update {key!r}: too many concurrent writers")

    async def keys(self) -> list[str]:
        """Every key (reads the whole bucket: for rare work, never per request)."""
        try:
            return list(await self.kv.keys())
        except Exception as exc:  # nats-py raises NoKeysError on an empty bucket
            if type(exc).__name__ == "NoKeysError":
                return []
            raise


async def keys_matching(js: JetStreamContext, bucket: str, pattern: str) -> list[str]:
    """The keys of `bucket` matching a subject pattern (`thread1.>`), sorted, found by the server from
    its subject index: the cost follows the number of matches, not the size of the bucket.

    A key deleted with `drop_keys` is gone; one deleted through the KV API (a delete marker) would
    still be listed, so index buckets are cleaned with `drop_keys`.

    A bucket split by partition (`bus.split_kv`) is asked in the pattern's partition's bucket, and in
    the single bucket of before the split while it is there.
    """
    names = await bucket_names(js, bucket, pattern)
    found: set[str] = set()
    for name in names:
        prefix = f"$KV.{name}."
        try:
            info = await js.stream_info(f"KV_{name}", subjects_filter=prefix + pattern)
        except NotFoundError:
            if len(names) == 1:
                raise
            continue  # the bucket of before the split, removed meanwhile
        found.update(subject[len(prefix) :] for subject in (info.state.subjects or {}))
    return sorted(found)


async def drop_keys(js: JetStreamContext, bucket: str, pattern: str) -> None:
    """Remove the keys matching `pattern` from `bucket` completely (no delete marker is left)."""
    names = await bucket_names(js, bucket, pattern)
    for name in names:
        try:
            await js.purge_stream(f"KV_{name}", subject=f"$KV.{name}.{pattern}")
        except NotFoundError:
            if len(names) == 1:
                raise
