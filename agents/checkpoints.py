"""The runner's checkpoints: the saver, rolling a run back, and what a run already finished.

`runner.checkpointer` picks LangGraph's saver: `sqlite` (a file under the data
dir; one machine) or `postgres` (a pooled connection to a shared database, so a
run resumed by a runner on another machine finds its checkpoints). Past opening
the saver, everything here and in the runner, the threads service and the
subagent executor goes through the saver's public API (`aget_tuple`, `alist`,
`aput`, `adelete_thread`), so both behave the same.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, copy_checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from config import AppConfig

log = logging.getLogger(__name__)

# Any constant shared by every process using one database: setup runs under this lock.
_SETUP_LOCK = 0x616E746C6572  # "antler"


@contextlib.asynccontextmanager
async def checkpointer_ready(config: AppConfig) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The configured saver, its tables created, for one component process (runner, subagent executor)."""
    if config.runner.checkpointer == "postgres":
        async with _postgres(config) as saver:
            yield saver
    else:
        async with _sqlite(config) as saver:
            yield saver


@contextlib.asynccontextmanager
async def _sqlite(config: AppConfig) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from agents.sqlite_saver import ThreadedSqliteSaver

    path = Path(config.runner.checkpoint_db or Path(config.bus.data_dir) / "checkpoints.sqlite")
    path.parent.mkdir(parents=True, exist_ok=True)
    async with ThreadedSqliteSaver.open(path) as saver:
        yield saver


@contextlib.asynccontextmanager
async def _postgres(config: AppConfig) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    url = config.runner.postgres_url
    if not url:
        raise ValueError("runner.checkpointer is postgres, but runner.postgres_url is not set")
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=config.runner.postgres_pool_size,
        # What AsyncPostgresSaver needs of its connections (its own from_conn_string sets the same).
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
        name="antler-checkpoints",
    )
    await pool.open(wait=True, timeout=config.bus.connect_timeout_seconds * 6)
    try:
        saver = AsyncPostgresSaver(conn=pool)
        # Several runners starting at once on a fresh database would race on its migrations.
        async with await AsyncConnection.connect(url, autocommit=True) as lock:
            await lock.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
            try:
                await saver.setup()
            finally:
                await lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
        yield saver
    finally:
        await pool.close()


async def rollback(checkpointer: BaseCheckpointSaver[Any], thread_id: str, run_id: str) -> None:
    """Undo what a run wrote to its thread: the thread's state returns to what it was before the run.

    LangGraph's savers cannot delete one run's checkpoints (`adelete_for_runs` is not
    implemented by the SQLite or Postgres saver), so the state before the run is written
    again as the thread's newest checkpoint, child of the run's last one. The run's steps
    stay in the thread's history, followed by the restored state (metadata `source`
    "rollback", `rolled_back_run_id`); the thread continues from the restored state.
    """
    thread: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    head = await checkpointer.aget_tuple(thread)
    if head is None or head.metadata.get("run_id") != run_id:
        log.info("run %s: nothing of it is in thread %s; nothing to roll back", run_id, thread_id)
        return
    before = None
    written = 0
    async for found in checkpointer.alist(thread):  # newest first
        if found.metadata.get("run_id") != run_id:
            before = found
            break
        written += 1
    if before is None:
        restored = empty_checkpoint()
        versions: dict[str, Any] = {}
    else:
        restored = copy_checkpoint(before.checkpoint)
        versions = dict(restored["channel_versions"])
    restored["id"] = str(uuid6(clock_seq=head.metadata.get("step", -1) + 1))
    restored["ts"] = datetime.now(UTC).isoformat()
    metadata: dict[str, Any] = {
        **(before.metadata if before is not None else {}),
        "source": "rollback",
        "step": head.metadata.get("step", -1) + 1,
        "parents": {},
        "rolled_back_run_id": run_id,
    }
    metadata.pop("run_id", None)
    await checkpointer.aput(head.config, restored, metadata, versions)  # type: ignore[arg-type]  # CheckpointMetadata, built as a dict
    log.info("run %s rolled back (%d checkpoints of it in the thread's history)", run_id, written)


def since_last_input(messages: list[Any]) -> list[Any]:
    """The assistant's and tools' messages after the last user message: what this run produced."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1) + 1
    return [
        m
        for m in messages[start:]
        if isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and (m.content or m.tool_calls))
    ]
