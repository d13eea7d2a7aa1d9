"""The subagent executor in a test, and what tests send to and read from delegated runs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agents.subagents import EXECUTOR_DURABLE
from agents.subagents import run as run_executor
from bus import Bus
from bus.messages import RunEvent, RunRequest
from config import AppConfig
from tests.conftest import running_component
from tests.fakes.openai_server import ToolCall


def running_executor(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        for _ in range(400):  # its durable consumer exists: the task tool can submit to it
            if task.done():
                task.result()
            with contextlib.suppress(Exception):
                await bus.js.consumer_info(bus.subjects.subagents_stream, EXECUTOR_DURABLE)
                return
            await asyncio.sleep(0.025)
        raise TimeoutError("the subagent executor did not start")

    return running_component(nats_url, config, run_executor, "subagents", ready)


def delegate(thread_id: str, text: str) -> RunRequest:
    return RunRequest(
        thread_id=thread_id,
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=["messages-tuple", "values", "custom"],
        context={"subagent_enabled": True},
    )


def task_call(call_id: str, prompt: str, **args: Any) -> ToolCall:
    return ToolCall("task", {"description": f"do {call_id}", "prompt": prompt, **args}, id=call_id)


def task_events(events: list[RunEvent], task_id: str) -> list[str]:
    return [
        e.data["type"]
        for e in events
        if e.event == "custom" and isinstance(e.data, dict) and e.data.get("task_id") == task_id
    ]


def tool_results(events: list[RunEvent]) -> dict[str, dict[str, Any]]:
    """The task tool messages of the run's final state, by tool call id."""
    values = next(e.data for e in reversed(events) if e.event == "values")
    return {m["tool_call_id"]: m for m in values["messages"] if m["type"] == "tool"}
