"""The client's connection and what every method shares: calls to services, threads, errors."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from antler.client._connection import Denials, Login, connect, find_login, load
from antler.client.errors import (
    ClientError,
    InvalidRequest,
    NotAllowed,
    NotFound,
    Unavailable,
)
from bus import Bus
from bus.messages import ID_RULE, Reply, ThreadCreateReply, ThreadCreateRequest, ThreadRecord, is_valid_id
from bus.records import RecordStore, repair_by_key
from bus.service import call
from config import AppConfig

T = TypeVar("T")
R = TypeVar("R", bound=Reply)
DEFAULT_USER = "default"  # the gateway's one user in single-user mode: the web UI shows the same threads

_ERRORS: dict[str, type[ClientError]] = {
    "not_found": NotFound,
    "not_allowed": NotAllowed,
    "invalid": InvalidRequest,
    "conflict": InvalidRequest,
    "too_large": InvalidRequest,
    "unavailable": Unavailable,
    "timeout": Unavailable,
}


def service_error(code: str, message: str) -> ClientError:
    """A service's refusal as the client's error."""
    return _ERRORS.get(code, ClientError)(message)


class Connected:
    """A client's connection to one Antler, opened on first use, closed by `close()`."""

    def __init__(
        self,
        config: str | os.PathLike[str] | AppConfig | None = None,
        *,
        nats_url: str | None = None,
        user: str | None = None,
        password: str | None = None,
        creds: str | os.PathLike[str] | None = None,
        user_id: str = DEFAULT_USER,
    ) -> None:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidRequest(f"user_id: a non-empty string, not {user_id!r}")
        if creds is not None and user is not None:
            raise InvalidRequest("creds and user: give one of them (a context file holds its user)")
        self.config: AppConfig = load(config)
        self._config_path = Path(config).resolve() if isinstance(config, str | os.PathLike) else None
        self.user_id = user_id
        self._where: dict[str, Any] = {"url": nats_url, "user": user, "password": password, "creds": creds}
        self._bus: Bus | None = None
        self._denials: Denials | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self._login: Login | None = None

    async def _started(self) -> None:
        """Before connecting: the embedded client starts its Antler here."""

    async def _stopped(self) -> None:
        """After closing: the embedded client stops its Antler here."""

    async def connect(self) -> Bus:
        """The connection, opened now if it is not yet.

        Raises:
            AntlerNotRunning: no Antler at the URL found or given, or it refused the login.
        """
        if self._closed:
            raise ClientError("this client is closed; make a new one")
        if self._bus is not None:
            return self._bus
        async with self._opening:
            if self._bus is None:
                await self._started()
                self._login = find_login(self.config, **self._where)
                bus = await connect(self.config, self._login, "antler-client")
                self._denials = Denials(bus)
                self._bus = bus
        return self._bus

    async def close(self) -> None:
        """Close the connection (and stop an embedded Antler). Idempotent."""
        self._closed = True
        bus, self._bus = self._bus, None
        try:
            if bus is not None:
                await bus.close()
        finally:
            await self._stopped()

    async def _guarded(self, what: str, step: Callable[[Bus], Awaitable[T]]) -> T:
        """`step(bus)`, failing at once with `NotAllowed` if the bus refuses this user meanwhile."""
        bus = await self.connect()
        assert self._denials is not None
        return await self._denials.guard(what, lambda: step(bus))

    async def _ask(
        self, service: str, endpoint: str, request: Any, reply: type[R], *, timeout: float = 30.0
    ) -> R:
        """A request to one of Antler's services, its refusals as the client's errors."""
        unavailable = {
            "threads": "no agent runner is running to answer thread requests (`antler up` starts them)",
            "memory": "no memory updater is running (`antler up` starts one; or `antler run memory`)",
            "schedules": "no scheduler is running (`antler up` starts one; or `antler run scheduler`)",
        }.get(service)

        async def step(bus: Bus) -> R:
            return await call(
                bus,
                service,
                endpoint,
                request,
                reply,
                timeout=timeout,
                errors=service_error,
                unavailable=unavailable,
            )

        return await self._guarded(f"{service}.{endpoint}", step)

    # ------------------------------------------------------------------ threads

    async def _threads(self) -> RecordStore[ThreadRecord]:
        bus = await self.connect()
        return RecordStore(
            await bus.kv(bus.subjects.threads_bucket),
            ThreadRecord,
            repair=repair_by_key(ThreadRecord, "thread_id"),
        )

    async def _own_thread(self, thread_id: str) -> ThreadRecord:
        """The user's thread, or NotFound (also for another user's: its existence is not told)."""
        check_thread_id(thread_id)
        record = await self._guarded("read the thread", lambda _bus: self._read_thread(thread_id))
        if record is None or record.user_id != self.user_id:
            raise NotFound(f"thread {thread_id} not found")
        return record

    async def _read_thread(self, thread_id: str) -> ThreadRecord | None:
        return await (await self._threads()).get(thread_id)

    async def _own_or_new_thread(self, thread_id: str) -> ThreadRecord:
        """The user's thread, created for them when no thread has that id."""
        check_thread_id(thread_id)
        record = await self._guarded("read the thread", lambda _bus: self._read_thread(thread_id))
        if record is None:
            created = await self._ask(
                "threads",
                "create",
                ThreadCreateRequest(thread_id=thread_id, user_id=self.user_id),
                ThreadCreateReply,
            )
            record = created.thread
        if record is None or record.user_id != self.user_id:
            raise NotFound(f"thread {thread_id} not found (or not usable for a new thread: choose another)")
        return record


def check_thread_id(thread_id: Any) -> None:
    if not isinstance(thread_id, str) or not is_valid_id(thread_id):
        raise InvalidRequest(f"thread_id {thread_id!r} is not usable ({ID_RULE})")
