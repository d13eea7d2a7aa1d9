"""The runner's checkpoints: the saver, rolling a run back, and what a run already finished.

Rollback is the one place that goes below the saver's API (LangGraph's savers can delete a
whole thread, not one run's checkpoints); it needs the SQLite saver.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from config import AppConfig

log = logging.getLogger(__name__)


async def open_checkpointer(config: AppConfig) -> Any:
    """The default checkpointer: SQLite under the data dir (an async context manager)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = Path(config.runner.checkpoint_db or Path(config.bus.data_dir) / "checkpoints.sqlite")
    path.parent.mkdir(parents=True, exist_ok=True)
    return AsyncSqliteSaver.from_conn_string(str(path))


@contextlib.asynccontextmanager
async def checkpointer_ready(config: AppConfig) -> AsyncIterator[Any]:
    """The checkpointer, its tables created, for one component process (runner, subagent executor)."""
    async with await open_checkpointer(config) as checkpointer:
        await checkpointer.setup()
        # WAL + NORMAL: commits survive a crashed process (our failure model) without an fsync each.
        await checkpointer.conn.execute("PRAGMA synchronous=NORMAL")
        yield checkpointer


async def rollback(checkpointer: Any, thread_id: str, run_id: str) -> None:
    """Remove what a run wrote to its thread: its checkpoints go, the state before it returns."""
    conn = getattr(checkpointer, "conn", None)
    if conn is None:
        log.warning("run %s: this checkpointer cannot roll back; the partial run stays", run_id)
        return
    async with checkpointer.lock:
        ids = [
            row[0]
            async for row in await conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? "
                "AND json_extract(CAST(metadata AS TEXT), '$.run_id') = ?",
                (thread_id, run_id),
            )
        ]
        for checkpoint_id in ids:
            for table in ("writes", "checkpoints"):
                await conn.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id = ?",
                    (thread_id, checkpoint_id),
                )
        await conn.commit()
    log.info("run %s rolled back (%d checkpoints removed)", run_id, len(ids))


def since_last_input(messages: list[Any]) -> list[Any]:
    """The assistant's and tools' messages after the last user message: what this run produced."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1) + 1
    return [
        m
        for m in messages[start:]
        if isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and (m.content or m.tool_calls))
    ]
