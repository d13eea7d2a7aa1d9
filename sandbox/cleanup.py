"""A deleted thread's sandbox directories go with it, on every broker.

Each broker keeps its threads' directories on its own disk, so every broker
must hear of every deletion: a shared durable would hand each announcement to
one of them. Each broker reads `<prefix>.events.thread.deleted` with an ordered
(unnamed) consumer instead, starting after the last announcement its sandbox
directory has handled (a cursor file beside the threads, `.thread-deleted.seq`):
a broker that was down catches up on what it missed when it starts, as long
as the EVENTS stream still holds it (7 days), before it serves any request, so
a thread id used again never shows a new thread the old one's files. Brokers
sharing one directory share its cursor; deleting twice is harmless.

A directory made after the announcement (the id reused while this broker was
down, before it caught up) is left alone: its mtime is later than the
announcement's `deleted_at`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from nats.js.api import ConsumerConfig, DeliverPolicy

from bus import Bus
from bus.messages import ThreadDeleted, decode
from bus.tasks import cancel_and_wait, wait_for
from sandbox.paths import ThreadFS

log = logging.getLogger(__name__)

CURSOR = ".thread-deleted.seq"
CATCH_UP_TIMEOUT = 30.0  # seconds start-up waits for missed announcements before serving anyway


def remove_thread(root: Path, user_id: str, thread_id: str, deleted_at: datetime) -> bool:
    """Delete the thread's directory tree (never following a symlink); True if there was one."""
    directory = ThreadFS(root, user_id, thread_id).base.parent
    try:
        made = directory.stat().st_mtime
    except FileNotFoundError:
        return False
    if made > deleted_at.timestamp():
        log.info("thread %s of %s: its directory is newer than its deletion; kept", thread_id, user_id)
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


class ThreadCleaner:
    """Follows thread deletions for one sandbox directory; `start()` returns once caught up."""

    def __init__(self, bus: Bus, root: Path, forget: Any) -> None:
        self.bus = bus
        self.root = root
        self.cursor = root / CURSOR
        self.forget = forget  # called with (user_id, thread_id) once its files are gone
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.handled = 0
        self.caught_up = asyncio.Event()
        self._sub: Any = None
        self._worker: asyncio.Task[None] | None = None

    def _read_cursor(self) -> int:
        try:
            return int(self.cursor.read_text(encoding="ascii").strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_cursor(self, seq: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = self.cursor.with_name(f"{CURSOR}.{os.getpid()}")
        temporary.write_text(str(seq), encoding="ascii")
        os.replace(temporary, self.cursor)

    async def start(self) -> None:
        after = await asyncio.to_thread(self._read_cursor)
        self.handled = after
        config = (
            ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)
            if after
            else ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        )
        self._sub = await self.bus.js.subscribe(
            self.bus.subjects.event("thread.deleted"),
            stream=self.bus.subjects.stream("EVENTS"),
            ordered_consumer=True,
            config=config,
            cb=self.queue.put,
        )
        self._worker = asyncio.create_task(self._work(), name="sandbox-thread-cleaner")
        info = await self._sub.consumer_info()
        # Nothing left to deliver and nothing delivered that is not handled: caught up. Otherwise the
        # worker says so once it has handled a message after which nothing was pending.
        delivered = info.delivered.stream_seq if info.delivered is not None else 0
        if info.num_pending == 0 and (delivered or 0) <= self.handled:
            self.caught_up.set()
        try:
            await wait_for(self.caught_up.wait(), CATCH_UP_TIMEOUT)
        except TimeoutError:
            log.warning(
                "sandbox: still catching up on deleted threads after %.0fs; serving", CATCH_UP_TIMEOUT
            )

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        if self._worker is not None:
            await cancel_and_wait(self._worker)

    async def _work(self) -> None:
        while True:
            msg = await self.queue.get()
            try:
                await self._handle(msg)
            except Exception:  # one bad announcement never stops the others
                log.exception("sandbox: a thread deletion could not be handled")
            meta = msg.metadata
            if meta.sequence.stream > self.handled:
                self.handled = meta.sequence.stream
                await asyncio.to_thread(self._write_cursor, self.handled)
            if meta.num_pending == 0:
                self.caught_up.set()

    async def _handle(self, msg: Any) -> None:
        try:
            event = decode(ThreadDeleted, msg.data)
        except Exception as exc:
            log.warning("sandbox: an unreadable thread deletion was skipped: %s", exc)
            return
        removed = await asyncio.to_thread(
            remove_thread, self.root, event.user_id, event.thread_id, event.deleted_at
        )
        self.forget(event.user_id, event.thread_id)
        if removed:
            log.info("deleted the sandbox files of thread %s (user %s)", event.thread_id, event.user_id)
