"""A model's budget shared by the whole cluster: calls in flight, calls and tokens per minute.

One KV bucket, `<prefix>_model_slots`, holds every model's budget; each process keeps a view of
it through one watch and writes only with compare-and-set (expected last revision), so two
processes never take the same slot:

    <model>.slot.<i>        a call in flight (value: its holder), i < max_concurrent_calls
    <model>.wait.<ticket>   a call waiting for a slot; tickets are served in the order they were made
    <model>.rpm.<minute>    calls started in that minute (requests_per_minute)
    <model>.tpm.<minute>    tokens used in that minute (tokens_per_minute)

Slots and tickets are leases: written with a per-message TTL (`model_calls.lease_seconds`) and
renewed every third of it while their process lives. A process that dies stops renewing; the
server removes its entries when the TTL runs out and places a marker every watcher sees (the
bucket's `limit_marker_ttl`, nats-server 2.11+), so the slot is free for the next in line without
anyone polling. A waiter sleeps until its view changes (at most a lease, in case a change was
missed); nothing spins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass, field

from nats.js.errors import KeyWrongLastSequenceError

from bus import Bus
from bus.lease_keys import KeyEntry, LeaseKeys
from bus.tasks import cancel_and_wait, wait_for

log = logging.getLogger(__name__)

BUCKET = "model_slots"
START_PATIENCE = 30.0  # seconds to wait for the first view of the bucket
COUNTER_TTL = 120  # seconds a per-minute counter outlives its minute
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def model_key(name: str) -> str:
    """A model's name as one KV key token (other characters become `_`, with a digest then)."""
    safe = _UNSAFE.sub("_", name)
    if safe != name:
        safe += "-" + uuid.uuid5(uuid.NAMESPACE_OID, name).hex[:8]
    return safe


@dataclass(eq=False)
class Lease:
    """A slot this process holds (or a ticket it waits with), renewed until released."""

    key: str
    revision: int
    value: bytes
    lost: bool = False


@dataclass
class _View:
    entries: dict[str, KeyEntry] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class ModelSlots:
    """This process's side of every model's cluster budget. `start()` before use, `close()` at the end."""

    def __init__(self, bus: Bus, lease_seconds: int) -> None:
        self.bus = bus
        self.lease_seconds = max(int(lease_seconds), 1)
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self._view = _View()
        self._leases: set[Lease] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        # Through a cluster's leader election (a node died): a model call waits, it does not fail.
        self._keys = LeaseKeys(bus, bus.subjects.bucket(BUCKET), self.lease_seconds, patient=True)

    async def start(self) -> None:
        await self._keys.open()
        self._tasks = [
            asyncio.create_task(self._watch(), name="model-slots-watch"),
            asyncio.create_task(self._renew(), name="model-slots-renew"),
        ]
        try:
            await wait_for(self._ready.wait(), START_PATIENCE)
        except TimeoutError:
            await self.close()
            raise RuntimeError(
                f"cannot watch the model budgets (KV bucket {self.bus.subjects.bucket(BUCKET)}); "
                "run `antler provision` and check the component's bus rights"
            ) from None

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)
        for lease in list(self._leases):
            await self.release(lease)

    # ------------------------------------------------------------------ slots

    async def acquire(self, model: str, limit: int) -> Lease:
        """A slot of `model` (at most `limit` held across the cluster), once it is this call's turn."""
        base = model_key(model)
        ticket: Lease | None = None
        try:
            while True:
                changed = self._view.changed
                waiting = self._tickets(base)
                if ticket is not None and (ticket.lost or ticket.key not in waiting):
                    ticket = None  # it lapsed (this process stalled past a lease): queue again
                free = self._free_slots(base, limit)
                position = (
                    0
                    if ticket is None
                    else next((i for i, key in enumerate(waiting) if key == ticket.key), len(waiting))
                )
                if ticket is None and waiting:
                    ticket = await self._write_new(f"{base}.wait.{uuid.uuid4().hex}", b"new")
                    continue
                if position < len(free):
                    lease = await self._claim(f"{base}.slot.{free[position]}")
                    if lease is not None:
                        return lease
                    # Another process took it first: look again once our view has caught up.
                    with contextlib.suppress(TimeoutError):
                        await wait_for(changed.wait(), 0.1)
                    continue
                if ticket is None:
                    ticket = await self._write_new(f"{base}.wait.{uuid.uuid4().hex}", b"new")
                    continue
                with contextlib.suppress(TimeoutError):
                    await wait_for(changed.wait(), self.lease_seconds)
        finally:
            if ticket is not None:
                await self.release(ticket)

    async def release(self, lease: Lease) -> None:
        """Give a slot (or ticket) back: a delete marker, if it is still ours."""
        self._leases.discard(lease)
        if lease.lost:
            return
        # A delete marker that goes itself after a while: tickets are new keys each time.
        await self._keys.release(lease.key, lease.revision, "model slot")

    def _free_slots(self, base: str, limit: int) -> list[int]:
        prefix = f"{base}.slot."
        held = {
            int(key[len(prefix) :])
            for key, entry in self._view.entries.items()
            if key.startswith(prefix) and entry.live and key[len(prefix) :].isdigit()
        }
        busy = len(held)
        return [i for i in range(limit) if i not in held][: max(limit - busy, 0)]

    def _tickets(self, base: str) -> list[str]:
        """Waiting tickets of a model, oldest first (by the revision each was first written with)."""
        prefix = f"{base}.wait."
        found = []
        for key, entry in self._view.entries.items():
            if key.startswith(prefix) and entry.live:
                order = int(entry.value) if entry.value.isdigit() else entry.revision
                found.append((order, key))
        return [key for _, key in sorted(found)]

    async def _claim(self, key: str) -> Lease | None:
        known = self._view.entries.get(key)
        last = known.revision if known is not None else 0
        value = f"{self.holder}:{uuid.uuid4().hex[:8]}".encode()
        # Where our view was behind (the key is held, or its marker changed: a lapse we had not seen
        # yet, or a marker that expired itself and left the key empty), it is brought up to date.
        revision = await self._keys.claim(key, value, last, seen=self._seen)
        if revision is None:
            return None  # held by someone else now
        self._view.entries[key] = KeyEntry(revision, value, True)
        lease = Lease(key, revision, value)
        self._leases.add(lease)
        return lease

    def _seen(self, key: str, current: KeyEntry | None) -> None:
        if current is None:
            self._view.entries.pop(key, None)
        else:
            self._view.entries[key] = current

    async def _write_new(self, key: str, value: bytes) -> Lease:
        revision = await self._publish(key, value, 0)
        lease = Lease(key, revision, str(revision).encode() if value == b"new" else value)
        self._leases.add(lease)
        if value == b"new":  # its order, kept through renewals (each renewal is a new revision)
            lease.revision = await self._publish(key, lease.value, revision)
        self._view.entries[key] = KeyEntry(lease.revision, lease.value, True)
        return lease

    # ------------------------------------------------------------------ per-minute counters

    async def admit(self, model: str, requests_per_minute: int | None, tokens_per_minute: int | None) -> None:
        """Wait until this minute has room for one more call of `model`, and count it."""
        base = model_key(model)
        while True:
            minute = int(time.time() // 60)
            tokens = self._count(f"{base}.tpm.{minute}")
            calls_key = f"{base}.rpm.{minute}"
            if tokens_per_minute is not None and tokens[0] >= tokens_per_minute:
                await self._next_minute(minute)
                continue
            if requests_per_minute is None:
                return
            calls, revision = self._count(calls_key)
            if calls >= requests_per_minute:
                await self._next_minute(minute)
                continue
            try:
                await self._publish(calls_key, str(calls + 1).encode(), revision, ttl=COUNTER_TTL)
                return
            except KeyWrongLastSequenceError:
                await self._refresh_count(calls_key)

    async def spent(self, model: str, tokens: int) -> None:
        """Add a finished call's tokens to this minute's count (best effort: a lost race is retried)."""
        if tokens <= 0:
            return
        key = f"{model_key(model)}.tpm.{int(time.time() // 60)}"
        for _ in range(5):
            count, revision = self._count(key)
            try:
                await self._publish(key, str(count + tokens).encode(), revision, ttl=COUNTER_TTL)
                return
            except KeyWrongLastSequenceError:
                await self._refresh_count(key)
            except Exception as exc:
                log.warning("could not count %d tokens of %s: %s", tokens, model, exc)
                return

    def _count(self, key: str) -> tuple[int, int]:
        entry = self._view.entries.get(key)
        if entry is None:
            return 0, 0
        value = int(entry.value) if entry.live and entry.value.isdigit() else 0
        return value, entry.revision

    async def _refresh_count(self, key: str) -> None:
        current = await self._keys.current(key)
        if current is not None:
            self._view.entries[key] = current

    @staticmethod
    async def _next_minute(minute: int) -> None:
        await asyncio.sleep(max((minute + 1) * 60 - time.time(), 0.0) + 0.05)

    # ------------------------------------------------------------------ the bucket

    async def _publish(self, key: str, value: bytes, last: int, ttl: int | None = None) -> int:
        revision = await self._keys.write(key, value, last, ttl)
        self._view.entries[key] = KeyEntry(revision, value, True)
        return revision

    async def _watch(self) -> None:
        while True:
            try:
                watcher = await self._keys.kv.watch(">")
                async for update in watcher:
                    if update is None:
                        self._ready.set()
                        continue
                    live = update.operation is None and bool(update.value)
                    known = self._view.entries.get(update.key)
                    if known is None or (update.revision or 0) >= known.revision:
                        if live or ".slot." in update.key:
                            self._view.entries[update.key] = KeyEntry(
                                update.revision or 0, update.value or b"", live
                            )
                        else:  # a ticket or a minute's count that went: forget it (keys are not reused)
                            self._view.entries.pop(update.key, None)
                    self._changed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus went away: watch again (nothing is lost, entries are current)
                log.warning("model slots watch stopped (%s); watching again", exc)
                await asyncio.sleep(1.0)

    def _changed(self) -> None:
        self._view.changed.set()
        self._view.changed = asyncio.Event()

    async def _renew(self) -> None:
        """Renew every slot and ticket this process holds, every third of a lease."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            for lease in list(self._leases):
                try:
                    lease.revision = await self._publish(lease.key, lease.value, lease.revision)
                except KeyWrongLastSequenceError:
                    lease.lost = True  # it lapsed (this process stalled for a whole lease)
                    self._leases.discard(lease)
                    log.warning("model slot %s lapsed before it was renewed", lease.key)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("could not renew model slot %s: %s", lease.key, exc)
