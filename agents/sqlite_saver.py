"""SQLite checkpoints with one thread hop per call.

LangGraph's `AsyncSqliteSaver` goes through aiosqlite, which hands every statement, fetch,
cursor close and commit to its thread separately: about twenty hops between the event loop
and that thread for a plain chat turn, each waking a thread and passing the GIL. Here
LangGraph's own synchronous `SqliteSaver` does the work (same tables, same data), and each
saver call is one job on a thread of its own: six hops for the same turn.

Listing pages through the history (`before` + `limit`), so a long thread is never read into
memory at once and no lock is held between pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import fcntl
import functools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver

T = TypeVar("T")
LIST_PAGE = 50  # checkpoints read per hop when listing
BUSY_TIMEOUT = 30.0  # seconds a statement waits for another process's write to finish


class ThreadedSqliteSaver(BaseCheckpointSaver[str]):
    """LangGraph's SqliteSaver, its calls run on one worker thread, awaitable from the event loop."""

    def __init__(self, saver: SqliteSaver, executor: ThreadPoolExecutor) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver
        self._executor = executor

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, path: str | Path) -> AsyncIterator[ThreadedSqliteSaver]:
        """The saver on the database at `path`, its tables created (WAL, synchronous=NORMAL)."""
        executor = ThreadPoolExecutor(1, thread_name_prefix="checkpoints")
        loop = asyncio.get_running_loop()

        def connect() -> SqliteSaver:
            # Runner processes and the subagent executor open one file, often at the same moment on a
            # fresh data dir: creating the tables and switching to WAL happen one process at a time
            # (an advisory lock beside the file), and writers wait for each other instead of failing.
            with open(f"{path}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_TIMEOUT)
                    saver = SqliteSaver(conn)
                    saver.setup()
                    # WAL + NORMAL: commits survive a crashed process (our failure model) without an
                    # fsync each.
                    conn.execute("PRAGMA synchronous=NORMAL")
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
            return saver

        saver = await loop.run_in_executor(executor, connect)
        try:
            yield cls(saver, executor)
        finally:
            await loop.run_in_executor(executor, saver.conn.close)
            executor.shutdown(wait=False)

    def with_allowlist(self, extra_allowlist: Any) -> ThreadedSqliteSaver:
        """LangGraph's msgpack allowlist for a graph's state types, on the saver that does the work."""
        inner = self.saver.with_allowlist(extra_allowlist)
        if inner is self.saver:
            return self
        clone = copy.copy(self)
        clone.saver = cast(SqliteSaver, inner)  # with_allowlist returns a saver of its own class
        clone.serde = inner.serde
        return clone

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # ------------------------------------------------------------------ async (the runner's)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._call(self.saver.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        left = limit
        while left is None or left > 0:
            page = LIST_PAGE if left is None else min(LIST_PAGE, left)
            found = await self._call(
                lambda before=before, page=page: list(
                    self.saver.list(config, filter=filter, before=before, limit=page)
                )
            )
            for item in found:
                yield item
            if len(found) < page:
                return
            if left is not None:
                left -= len(found)
            before = {"configurable": {"checkpoint_id": found[-1].config["configurable"]["checkpoint_id"]}}

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._call(self.saver.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._call(self.saver.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._call(self.saver.delete_thread, thread_id)

    # ------------------------------------------------------------------ sync (callers off the loop)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.saver.list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.saver.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.saver.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self.saver.get_next_version(current, channel)
