"""Both checkpoint savers, as `runner.checkpointer` opens them, pass LangGraph's conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES

from agents.checkpoints import checkpointer_ready
from config import AppConfig
from tests.conftest import both_checkpointers

pytestmark = [pytest.mark.asyncio, both_checkpointers]


async def test_the_configured_saver_passes_langgraphs_checkpointer_conformance_suite(
    app_config: Callable[[], AppConfig], checkpointer: dict[str, Any]
) -> None:
    config = app_config()

    async def saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with checkpointer_ready(config) as opened:
            yield opened

    registered = checkpointer_test(name=config.runner.checkpointer)(saver)
    report = await validate(registered)

    failures = {
        name: result.failures
        for name, result in report.results.items()
        if result.detected and result.passed is not True
    }
    assert failures == {}, f"{config.runner.checkpointer} saver failed conformance: {failures}"
    base = {capability.value for capability in BASE_CAPABILITIES}
    passed = {name for name, result in report.results.items() if result.passed is True}
    assert base <= passed, f"base capabilities not all tested: {sorted(base - passed)}"
    assert report.passed_all_base()


async def test_a_long_history_lists_whole_in_order_while_the_thread_goes_on(
    app_config: Callable[[], AppConfig], checkpointer: dict[str, Any]
) -> None:
    """Listing reads the history a page at a time: every checkpoint comes, newest first. Our SQLite
    saver also takes new checkpoints while a listing is under way (Postgres's holds its lock for
    the whole listing: not tried there)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    async with checkpointer_ready(app_config()) as saver:
        thread = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}

        async def add(step: int) -> str:
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=step))
            head = await saver.aget_tuple(thread)
            await saver.aput(head.config if head else thread, checkpoint, {"step": step}, {})
            return checkpoint["id"]

        ids = [await add(step) for step in range(130)]
        listed: list[str] = []
        async for found in saver.alist(thread):
            listed.append(found.config["configurable"]["checkpoint_id"])
            if len(listed) == 60 and not checkpointer:  # SQLite, past the first page: the thread goes on
                ids.append(await add(130))
        assert listed == list(reversed(ids[:130])), "all 130, newest first, none twice"
        newest = len(ids) - 1
        limited = [f async for f in saver.alist(thread, limit=70)]
        assert [f.metadata["step"] for f in limited] == list(range(newest, newest - 70, -1))
        before = {"configurable": {"checkpoint_id": ids[10]}}
        assert [f.metadata["step"] async for f in saver.alist(thread, before=before)] == list(
            range(9, -1, -1)
        )
