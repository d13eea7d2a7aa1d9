"""The KV buckets written every turn (`threads`, `runs`, `thread_runs`), split by partition.

A bucket is a stream, and JetStream gives a stream one leader: every record write of an
installation would go through one node of a cluster. So each of these buckets is one bucket per
partition, `<p>_<name>_<k>`, and a key's partition is computed from the key alone: nats-server's
`partition()` hash (`bus.chat_partitions.partition_of`) of its first token (a run's id, a thread's
id; a `thread_runs` key `<thread>.<ms>.<run>` is in its thread's partition, so a thread's runs are
listed from one bucket). The count is the buckets' own (`antler_partitions` in the metadata of
bucket 0's stream), fixed when provisioning first makes them (the chat partition count then): a
count changed later for the chat streams does not move any record.

`SplitKV` is a `KeyValue` with the same interface over them (get, put, create, update with the
expected revision, delete, keys, watch), which `Bus.kv` hands out for these names: `RecordStore`
and the other users of these buckets are unchanged.

Moving from an installation made before the split (one bucket `<p>_<name>`, "the legacy bucket"),
in any order of restarts, without losing a record:

- While the legacy bucket is there, it is read first: a live record in it is the record. New
  components keep writing there, as earlier versions do, so that components of both versions see
  each other's records (phase "legacy").
- `antler provision`, once no process of an earlier version is heard on the metrics feed (every
  process says in its `MetricsSnapshot` whether it knows the split: `earlier_versions`), marks the
  legacy bucket's stream as moving (metadata `antler_moving`), waits
  until every process has seen the mark (`REFRESH`, and a margin), then moves every record. From
  the mark on, a process writing a record found in the legacy bucket moves it: it replaces it there,
  by compare-and-set, with a "moved" marker holding the new value (the commit point: a writer that
  read the older value fails its compare-and-set and reads again), then creates it in its
  partition's bucket. A record whose marker is there but not yet its copy (the mover stopped in
  between) is read from the marker, and the next write finishes the move. New records go to their
  partition's bucket.
- When every record of the legacy bucket has moved (two passes find nothing left), provisioning
  removes it (`bus.split_kv_retire`). A process that still thinks it is there finds it gone and
  reads the split buckets.

Revisions given to callers say where a record was read: positive, its partition bucket's; `-2r`,
a live record at revision `r` of the legacy bucket; `-(2r+1)`, a moved marker at `r` whose copy was
not made yet. Callers treat revisions as opaque tokens for compare-and-set, as `RecordStore` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nats.errors import NoRespondersError
from nats.js.errors import (
    BucketNotFoundError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
    NotFoundError,
    ServiceUnavailableError,
)
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from bus.chat_partitions import partition_of
from bus.subjects import SPLIT_BUCKETS

if TYPE_CHECKING:
    from bus.connection import Bus

log = logging.getLogger(__name__)

COUNT_KEY = "antler_partitions"  # in the metadata of `KV_<bucket>_0`: the buckets' partition count
MOVING_KEY = "antler_moving"  # in the legacy bucket's stream metadata: when its records began to move
MOVED = b"\x00antler-moved\n"  # a legacy record's value once it moved: this, then its value then
REFRESH = 5.0  # seconds a process trusts what it saw of the legacy bucket (there? moving?)
LISTEN = 6.0  # seconds provisioning listens to the metrics feed for processes of an earlier version
KINDS = ("threads", "runs", "thread_runs")  # the buckets split: written on every turn

# Errors a request to a bucket whose stream was removed meanwhile may raise.
_GONE = (NotFoundError, BucketNotFoundError, NoRespondersError, ServiceUnavailableError)


def partition_bucket(bucket: str, partition: int) -> str:
    """The bucket of one partition of `bucket` (full name, `<p>_runs` → `<p>_runs_<k>`)."""
    return f"{bucket}_{partition}"


def key_partition(key: str, count: int) -> int:
    """The partition of a key: its first token's (a run id, a thread id)."""
    return partition_of(key.split(".", 1)[0], count)


def is_moved(value: bytes | None) -> bool:
    return bool(value) and bytes(value or b"").startswith(MOVED)


@dataclass
class _Legacy:
    seen: float  # when looked at (the event loop's clock)
    present: bool
    moving: bool
    direct: bool = False  # answers direct gets (one server)


class SplitKV(KeyValue):
    """One of the per-turn buckets, split by partition, behind `KeyValue`'s interface (see the module).

    Args:
        bus: the connection (its JetStream context, its cached bucket handles).
        bucket: the bucket's full name as before the split (`Subjects.runs_bucket`).
    """

    def __init__(self, bus: Bus, bucket: str) -> None:
        super().__init__(name=bucket, stream=f"KV_{bucket}", pre=f"$KV.{bucket}.", js=bus.js, direct=False)
        self.bus = bus
        self.bucket = bucket
        self._parts: list[KeyValue] | None = None
        self._legacy_kv: KeyValue | None = None
        self._legacy: _Legacy | None = None

    # -- where keys are ------------------------------------------------------------------------
    async def partitions(self) -> list[KeyValue]:
        """The partition buckets, in order (their count read once: it never changes)."""
        if self._parts is None:
            from bus.errors import BusError

            try:
                info = await self.bus.js.stream_info(f"KV_{partition_bucket(self.bucket, 0)}")
            except NotFoundError:
                raise BusError(f"KV bucket {partition_bucket(self.bucket, 0)} is not provisioned") from None
            count = int((info.config.metadata or {}).get(COUNT_KEY) or 0)
            if count < 1:
                raise BusError(f"KV bucket {partition_bucket(self.bucket, 0)} does not say its count yet")
            self._parts = [await self.bus.kv(partition_bucket(self.bucket, k)) for k in range(count)]
        return self._parts

    async def _provisioned(self) -> list[KeyValue]:
        """The partition buckets; none while they are not made yet and the single bucket of before
        serves alone (components upgraded before provisioning made them)."""
        from bus.errors import BusError

        try:
            return await self.partitions()
        except BusError:
            legacy, moving = await self.legacy()
            if legacy is not None and not moving:
                return []
            raise

    async def _in_parts(self, key: str) -> KeyValue.Entry:
        """The key's entry in its partition's bucket (KeyNotFoundError: none, or no such buckets yet)."""
        parts = await self._provisioned()
        if not parts:
            raise KeyNotFoundError
        return await parts[key_partition(key, len(parts))].get(key)

    async def part(self, key: str) -> KeyValue:
        """The partition bucket of `key`."""
        parts = await self.partitions()
        return parts[key_partition(key, len(parts))]

    async def legacy(self, *, fresh: bool = False) -> tuple[KeyValue | None, bool]:
        """The bucket of before the split if it is still there (looked at again every `REFRESH`
        seconds), and whether its records are moving."""
        now = asyncio.get_running_loop().time()
        seen = self._legacy
        if fresh or seen is None or now - seen.seen > REFRESH:
            try:
                info = await self.bus.js.stream_info(self._stream)
                moving = bool((info.config.metadata or {}).get(MOVING_KEY))
                seen = _Legacy(now, True, moving, bool(info.config.allow_direct))
            except NotFoundError:
                seen = _Legacy(now, False, False)
            self._legacy = seen
        if not seen.present:
            return None, False
        if self._legacy_kv is None:
            self._legacy_kv = KeyValue(
                name=self.bucket, stream=self._stream, pre=self._pre, js=self.bus.js, direct=seen.direct
            )
        return self._legacy_kv, seen.moving

    def _legacy_gone(self) -> None:
        self._legacy = _Legacy(asyncio.get_running_loop().time(), False, False)

    async def _legacy_entry(self, key: str) -> KeyValue.Entry | None:
        legacy, _ = await self.legacy()
        if legacy is None:
            return None
        try:
            return await legacy.get(key)
        except KeyNotFoundError:
            return None
        except _GONE:
            self._legacy_gone()
            return None

    # -- KeyValue's interface ------------------------------------------------------------------
    async def get(self, key: str, revision: int | None = None, validate_keys: bool = True) -> KeyValue.Entry:
        if revision is not None:
            raise NotImplementedError("a split bucket's history is not kept")
        old = await self._legacy_entry(key)
        if old is not None and old.revision is not None:
            value = old.value or b""
            if not is_moved(value):
                return _entry(old, value, -2 * old.revision)
            try:
                return await self._in_parts(key)
            except KeyNotFoundError:  # moved, not copied yet: the marker holds it
                return _entry(old, value[len(MOVED) :], -(2 * old.revision + 1))
        return await self._in_parts(key)

    async def put(self, key: str, value: bytes, validate_keys: bool = True) -> int:
        legacy, moving = await self.legacy()
        if legacy is not None:
            old = await self._legacy_entry(key)
            moved = old is not None and is_moved(old.value)
            if not moving and not moved:  # where earlier versions read it (a moved one stays moved)
                try:
                    return -2 * await legacy.put(key, value)
                except _GONE:
                    self._legacy_gone()
            elif old is not None and old.revision is not None and not moved:
                # A live legacy record would hide the new value: the new value moves it.
                return await self.update(key, value, last=-2 * old.revision)
        return await (await self.part(key)).put(key, value)

    async def create(
        self, key: str, value: bytes, validate_keys: bool = True, msg_ttl: float | None = None
    ) -> int:
        legacy, moving = await self.legacy()
        if legacy is not None and not moving:
            try:
                return -2 * await legacy.create(key, value)
            except _GONE:
                self._legacy_gone()
        elif legacy is not None and await self._legacy_entry(key) is not None:
            raise KeyWrongLastSequenceError(description="the key exists")
        return await (await self.part(key)).create(key, value)

    async def update(
        self, key: str, value: bytes, last: int | None = None, validate_keys: bool = True
    ) -> int:
        if last is None or last >= 0:
            return await (await self.part(key)).update(key, value, last=last)
        legacy, moving = await self.legacy()
        if legacy is None:  # removed since it was read: the record is in its partition's bucket now
            raise KeyWrongLastSequenceError(description="the bucket of before the split is gone")
        revision, marker = divmod(-last, 2)
        try:
            if marker:  # moved and not copied: whoever creates the copy first wins
                return await (await self.part(key)).create(key, value)
            if not moving:
                return -2 * await legacy.update(key, value, last=revision)
            await legacy.update(key, MOVED + value, last=revision)
        except _GONE:
            self._legacy_gone()
            raise KeyWrongLastSequenceError(description="the bucket of before the split is gone") from None
        return await self._copy(key, value)

    async def delete(
        self, key: str, last: int | None = None, validate_keys: bool = True, msg_ttl: float | None = None
    ) -> bool:
        legacy, _ = await self.legacy()
        if legacy is not None and await self._legacy_entry(key) is not None:
            with contextlib.suppress(*_GONE):
                await legacy.delete(key)
        parts = await self._provisioned()
        if parts:
            await parts[key_partition(key, len(parts))].delete(key)
        return True

    async def keys(self, filters: list[str] | None = None, **kwargs: Any) -> list[str]:
        found: set[str] = set()
        legacy, _ = await self.legacy()
        for kv in [*(await self._provisioned()), *([legacy] if legacy is not None else [])]:
            try:
                found.update(await kv.keys(filters or [], **kwargs))
            except NoKeysError:
                continue
            except _GONE:
                self._legacy_gone()
        if not found:
            raise NoKeysError
        return sorted(found)

    async def stored_keys(self) -> set[str]:
        """Every key the buckets have a message for (deleted ones too, as a watch brings their
        markers): read from the streams' subject index, not the records."""
        legacy, _ = await self.legacy()
        names = [partition_bucket(self.bucket, k) for k in range(len(await self._provisioned()))]
        found: set[str] = set()
        for name in [*names, *([self.bucket] if legacy is not None else [])]:
            prefix = f"$KV.{name}."
            try:
                info = await self.bus.js.stream_info(f"KV_{name}", subjects_filter=prefix + ">")
            except _GONE:
                continue
            found.update(subject[len(prefix) :] for subject in (info.state.subjects or {}))
        return found

    async def watch(  # type: ignore[override]  # the same arguments, passed on by name
        self, keys: str, **kwargs: Any
    ) -> KeyValue.KeyWatcher:
        """Every partition bucket's (and the legacy bucket's) watch of `keys`, merged: one `None`
        once every one has given what it held. A moved marker comes as its value."""
        legacy, _ = await self.legacy()
        kvs = [*(await self._provisioned()), *([legacy] if legacy is not None else [])]
        return await _MergedWatcher.start(self.bus.js, kvs, keys, kwargs)

    # -- moving --------------------------------------------------------------------------------
    async def _entry_in_parts(self, key: str) -> KeyValue.Entry | None:
        try:
            return await self._in_parts(key)
        except KeyNotFoundError:
            return None

    async def _copy(self, key: str, value: bytes) -> int:
        """After the moved marker: the record's copy in its partition's bucket (made by whoever
        comes first: the same value, or a later one)."""
        part = await self.part(key)
        try:
            return await part.create(key, value)
        except KeyWrongLastSequenceError:
            entry = await part.get(key)
            return entry.revision or 0

    async def move_all(self) -> tuple[int, int]:
        """Move every record still live in the legacy bucket, and copy every moved one whose copy
        is missing. Returns (records moved, records still live that could not be moved now)."""
        legacy, _ = await self.legacy(fresh=True)
        if legacy is None:
            return 0, 0
        try:
            keys = await legacy.keys()
        except NoKeysError:
            return 0, 0
        moved = left = 0
        for key in keys:
            for _ in range(20):
                entry = await self._legacy_entry(key)
                if entry is None or entry.revision is None:  # deleted
                    break
                value = entry.value or b""  # an index entry's value is empty
                try:
                    if is_moved(value):
                        if await self._entry_in_parts(key) is None:
                            await self._copy(key, value[len(MOVED) :])
                        break
                    await legacy.update(key, MOVED + value, last=entry.revision)
                    await self._copy(key, value)
                    moved += 1
                    break
                except KeyWrongLastSequenceError:
                    continue  # written meanwhile: again
            else:
                left += 1
        return moved, left


def _entry(found: KeyValue.Entry, value: bytes, revision: int) -> KeyValue.Entry:
    return KeyValue.Entry(
        bucket=found.bucket,
        key=found.key,
        value=value,
        revision=revision,
        delta=found.delta,
        created=found.created,
        operation=found.operation,
    )


class _MergedWatcher(KeyValue.KeyWatcher):
    """Several buckets' watchers as one (see `SplitKV.watch`)."""

    def __init__(self, js: Any) -> None:
        super().__init__(js)  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
        self._watchers: list[KeyValue.KeyWatcher] = []
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def start(
        cls, js: Any, kvs: Iterable[KeyValue], keys: str, kwargs: dict[str, Any]
    ) -> _MergedWatcher:
        merged = cls(js)
        try:
            for kv in kvs:
                merged._watchers.append(await kv.watch(keys, **kwargs))
        except BaseException:
            await merged.stop()
            raise
        waiting = {"count": len(merged._watchers)}

        async def forward(watcher: KeyValue.KeyWatcher) -> None:
            initial = True
            async for entry in watcher:
                if entry is None:
                    if initial:
                        initial = False
                        waiting["count"] -= 1
                        if waiting["count"] == 0:
                            await merged._updates.put(None)
                    continue
                if entry.operation not in (KV_DEL, KV_PURGE) and is_moved(entry.value):
                    entry = _entry(entry, (entry.value or b"")[len(MOVED) :], entry.revision or 0)
                await merged._updates.put(entry)

        merged._tasks = [asyncio.create_task(forward(w)) for w in merged._watchers]
        return merged

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for watcher in self._watchers:
            with contextlib.suppress(Exception):
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves KeyWatcher.stop unannotated
        while True:
            try:
                self._updates.put_nowait(KeyValue.KeyWatcher.STOP_ITER)
                return
            except asyncio.QueueFull:
                with contextlib.suppress(asyncio.QueueEmpty):
                    self._updates.get_nowait()


# -- listing by key filter (thread_runs) ---------------------------------------------------------

_layouts: weakref.WeakKeyDictionary[Any, dict[str, tuple[int | None, float, bool]]] = (
    weakref.WeakKeyDictionary()
)


async def bucket_names(js: Any, bucket: str, pattern: str) -> list[str]:
    """The buckets that may hold keys matching `pattern` (its first token a literal, a thread id):
    `bucket` itself when it is not split; else its partition's bucket, and the legacy bucket while
    it is there (looked at again every `REFRESH` seconds). For `bus.records.keys_matching` and
    `drop_keys`, which know only the JetStream context."""
    if bucket not in SPLIT_BUCKETS:
        return [bucket]
    now = asyncio.get_running_loop().time()
    known = _layouts.setdefault(js, {})
    count, seen, present = known.get(bucket, (None, -REFRESH - 1.0, True))
    if now - seen > REFRESH:  # looked at again: a bucket is split, or its legacy one removed, any time
        if count is None:
            try:
                info = await js.stream_info(f"KV_{partition_bucket(bucket, 0)}")
                count = int((info.config.metadata or {}).get(COUNT_KEY) or 0) or None
            except NotFoundError:
                count = None
        try:
            await js.stream_info(f"KV_{bucket}")
            present = True
        except NotFoundError:
            present = False
        seen = now
        known[bucket] = (count, seen, present)
    if count is None:
        return [bucket]
    return [partition_bucket(bucket, key_partition(pattern, count)), *([bucket] if present else [])]


async def last_key(bus: Bus, bucket: str, pattern: str) -> str | None:
    """The last key written under `pattern` in its partition's bucket or the legacy one (the higher
    of the two when both have one: `thread_runs` keys sort by time)."""
    found = []
    for name in await bucket_names(bus.js, bucket, pattern):
        try:
            msg = await bus.js.get_last_msg(f"KV_{name}", f"$KV.{name}.{pattern}")
        except _GONE:
            continue
        if msg.subject:
            found.append(msg.subject[len(f"$KV.{name}.") :])
    return max(found, default=None)
