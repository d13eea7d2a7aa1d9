"""The gateway's live view of the threads bucket, for thread search.

The web UI searches threads every few seconds; reading every record of the
bucket per search would make its cost grow with every thread anyone ever
made. Instead each gateway process watches KV `<prefix>_threads` once (a KV
watch: every record at start, then every change as it is written) and answers
searches from memory, per user. The bucket is one per partition (`bus.split_kv`): the watch is
all of theirs, merged.

Writes this gateway makes itself (through the threads service) are applied at
once as well, so a caller who just created, renamed or deleted a thread finds
it so in the next search; a change arriving later from the watch replaces a
record only when it is as new or newer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from nats.js.client import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from bus.errors import EnvelopeError
from bus.messages import ThreadRecord, decode
from bus.records import repair_by_key
from bus.split_kv import SplitKV

log = logging.getLogger(__name__)

_repair = repair_by_key(ThreadRecord, "thread_id")


class ThreadView:
    def __init__(self, js: JetStreamContext, kv: KeyValue) -> None:
        self.js = js
        self.kv = kv
        self._by_user: dict[str, dict[str, ThreadRecord]] = {}
        self._owner: dict[str, str] = {}  # thread id -> user id
        self._deleted: set[str] = set()  # deleted here; the watch's older news of them is ignored
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    async def ready(self) -> None:
        """Start watching (once) and wait until every stored record is in."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._watch(), name="thread-view")
        await asyncio.shield(self._ready)

    async def _watch(self) -> None:
        while True:
            try:
                expected = await self._stored_keys()
                watcher = await self.kv.watchall()
            except Exception as exc:
                if self._ready is not None and not self._ready.done():
                    self._ready.set_exception(exc)
                    self._ready = None  # the next search tries again
                    return
                log.warning("thread view: watching again failed (%s); retrying", exc)
                await asyncio.sleep(1.0)
                continue
            seen: set[str] = set()
            if expected == 0:
                self._settled()
            try:
                async for entry in watcher:
                    if entry is None:
                        continue
                    self._apply(entry.key, entry.operation, entry.value)
                    seen.add(entry.key)
                    if len(seen) >= expected:  # every key stored when the watch began is in
                        self._settled()
            except Exception as exc:  # the watch broke: start it again (records come again, all of them)
                log.warning("thread view: the watch stopped (%s); starting it again", exc)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves KeyWatcher.stop unannotated

    async def _stored_keys(self) -> int:
        """How many keys (deleted ones too: the watch brings their markers) the bucket has now (all
        its partitions' buckets: `bus.split_kv`)."""
        if isinstance(self.kv, SplitKV):
            return len(await self.kv.stored_keys())
        bucket = self.kv._name
        info = await self.js.stream_info(f"KV_{bucket}", subjects_filter=f"$KV.{bucket}.>")
        return len(info.state.subjects or {})

    def _settled(self) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def _apply(self, key: str, operation: Any, value: bytes | None) -> None:
        if operation in (KV_DEL, KV_PURGE):
            self._deleted.discard(key)
            self._drop(key)
            return
        if key in self._deleted:
            return
        try:
            record = decode(ThreadRecord, value or b"")
        except EnvelopeError as exc:  # listed as far as it can be read, as the runners will write it back
            log.warning("thread view: record %s cannot be read (%s): listing what can", key, exc)
            record = _repair(key, value or b"")
        current = self.get(key)
        if current is None or record.updated_at >= current.updated_at:
            self.put(record, mine=False)

    def put(self, record: ThreadRecord, *, mine: bool = True) -> None:
        """A record as written (`mine`: by this gateway, just now)."""
        if mine:
            self._deleted.discard(record.thread_id)
        owner = self._owner.get(record.thread_id)
        if owner is not None and owner != record.user_id:
            self._by_user.get(owner, {}).pop(record.thread_id, None)
        self._owner[record.thread_id] = record.user_id
        self._by_user.setdefault(record.user_id, {})[record.thread_id] = record

    def deleted(self, thread_id: str) -> None:
        """This gateway deleted the thread."""
        self._deleted.add(thread_id)
        self._drop(thread_id)

    def _drop(self, thread_id: str) -> None:
        owner = self._owner.pop(thread_id, None)
        if owner is not None:
            self._by_user.get(owner, {}).pop(thread_id, None)

    def get(self, thread_id: str) -> ThreadRecord | None:
        owner = self._owner.get(thread_id)
        return self._by_user.get(owner, {}).get(thread_id) if owner is not None else None

    async def search(
        self,
        user_id: str,
        *,
        keep: Callable[[ThreadRecord], bool],
        sort_by: str,
        descending: bool,
        offset: int,
        limit: int,
    ) -> list[ThreadRecord]:
        """The user's threads that `keep` accepts, sorted, one page."""
        await self.ready()
        found = [r for r in self._by_user.get(user_id, {}).values() if keep(r)]
        found.sort(key=lambda r: (getattr(r, sort_by), r.thread_id), reverse=descending)
        return found[offset : offset + limit]

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
