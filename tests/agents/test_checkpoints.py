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
