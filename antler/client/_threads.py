"""The user's threads, as the gateway's LangGraph thread routes answer them (`Thread` shape).

Records are read from the `threads` bucket; state comes from the runners' `threads` service, and a
deletion goes through it (the runners own threads), then the thread's files are deleted (uploads,
outputs, run journals), as the gateway does.
"""

from __future__ import annotations

import contextlib
from typing import Any

from antler.client._base import Connected
from antler.client.errors import InvalidRequest
from bus import Bus
from bus.files import OUTPUTS, UPLOADS, list_objects, thread_prefix
from bus.journal import JOURNALS
from bus.messages import (
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadRecord,
    ThreadStateReply,
    ThreadStateRequest,
)
from bus.runs import cancel_run
from gateway.answers import thread_json


class Threads(Connected):
    """list/get/delete threads and read their state."""

    async def list_threads(self, limit: int = 10, offset: int = 0) -> list[dict[str, Any]]:
        """The user's threads, most recently updated first; `values` holds the title when there is one."""
        if not isinstance(limit, int) or limit < 1 or not isinstance(offset, int) or offset < 0:
            raise InvalidRequest("limit: 1 or more, offset: 0 or more")

        async def read(bus: Bus) -> list[ThreadRecord]:
            store = await self._threads()
            return [r async for r in _records(store) if r.user_id == self.user_id]

        records = sorted(await self._guarded("list threads", read), key=lambda r: r.updated_at, reverse=True)
        return [
            thread_json(r, {"title": r.title} if r.title else None) for r in records[offset : offset + limit]
        ]

    async def get_thread(self, thread_id: str) -> dict[str, Any]:
        """One thread with its current values (messages, title, artifacts)."""
        record = await self._own_thread(thread_id)
        return thread_json(record, await self._values(thread_id))

    async def get_thread_state(self, thread_id: str) -> dict[str, Any]:
        """The thread's state as LangGraph gives it (`values`, `next`, `checkpoint`, ...)."""
        await self._own_thread(thread_id)
        reply = await self._ask(
            "threads",
            "state",
            ThreadStateRequest(thread_id=thread_id, user_id=self.user_id),
            ThreadStateReply,
        )
        return reply.state.model_dump(mode="json") if reply.state else {}

    async def _values(self, thread_id: str) -> dict[str, Any]:
        reply = await self._ask(
            "threads",
            "state",
            ThreadStateRequest(thread_id=thread_id, user_id=self.user_id),
            ThreadStateReply,
        )
        return reply.state.values if reply.state else {}

    async def delete_thread(self, thread_id: str) -> dict[str, Any]:
        """Delete a thread: its active run cancelled, its checkpoints, runs and files gone."""
        record = await self._own_thread(thread_id)
        if record.active_run_id:
            active = record.active_run_id
            await self._guarded(
                "cancel the run", lambda bus: cancel_run(bus, active, reason="thread deleted")
            )
        await self._ask(
            "threads",
            "delete",
            ThreadDeleteRequest(thread_id=thread_id, user_id=self.user_id),
            ThreadDeleteReply,
        )

        async def delete_files(bus: Bus) -> None:
            store = await bus.files()
            for kind in (UPLOADS, OUTPUTS, JOURNALS):
                for info in await list_objects(store, thread_prefix(kind, self.user_id, thread_id)):
                    with contextlib.suppress(Exception):
                        await store.delete(info.name)

        await self._guarded("delete the thread's files", delete_files)
        return {"success": True, "message": f"deleted thread {thread_id}"}


async def _records(store: Any) -> Any:
    for key in await store.keys():
        record = await store.get(key)
        if record is not None:
            yield record
