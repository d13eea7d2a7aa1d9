"""Subagents when processes die: a killed executor's task is finished by another, and a killed parent
runner's run, resumed, does not run its subagent's task again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from bus.messages import SubagentResult
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import running_runner
from tests.support.subagents import delegate, running_executor, task_call, task_events, tool_results

pytestmark = pytest.mark.asyncio


@contextlib.asynccontextmanager
async def component_process(
    name: str, nats_url: str, config: Path, log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`antler run <name>` as a child process, its output in `log`; killed on exit if still there."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antler",
            "run",
            name,
            "--nats-url",
            nats_url,
            "-c",
            str(config),
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=out,
            stderr=out,
        )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def until(check: Callable[[], Any], what: str, tries: int = 1200) -> None:
    """Poll `check` until it holds (a process is up, a record is written); fail naming `what`."""
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never came: {what}")


@pytest.fixture
def process_config(config_data: dict[str, Any], config_file: Callable[[], Path]) -> Path:
    # A killed process's work comes back after ack_wait: keep it short here.
    config_data["bus"]["ack_wait_seconds"] = 2.0
    config_data["subagents"]["timeout_seconds"] = 120
    return config_file()


async def test_a_killed_executors_task_is_finished_by_another_and_answered_once(
    bus: Bus,
    fake_model: FakeOpenAI,
    nats_url: str,
    process_config: Path,
    app_config: Callable[[], AppConfig],
    tmp_path: Path,
) -> None:
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_k", "Summarize the report")]),
        Reply(text="first try, never finished", when="Summarize the report", hold=never),
        Reply(text="The report says sales grew.", when="Summarize the report"),
        Reply(text="Sales grew, says the report.", when="sales grew"),
    )
    log = tmp_path / "executors.log"
    async with running_runner(nats_url, app_config()):
        async with component_process("subagents", nats_url, process_config, log) as first:
            await until(lambda: _consumer_exists(bus), "the first executor")
            request = delegate("t-kill-exec", "Summarize the report for me")
            await submit_run(bus, request)
            await fake_model.wait_for_requests(2, timeout=30)  # the subagent is at work in `first`
            first.send_signal(signal.SIGKILL)
            await first.wait()
        async with component_process("subagents", nats_url, process_config, log):
            events = await collect_run(bus, request.run_id, timeout=90)
    never.set()
    assert task_events(events, "call_k") == ["task_started", "task_running", "task_completed"]
    assert tool_results(events)["call_k"]["additional_kwargs"]["subagent_status"] == "completed"
    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "Sales grew, says the report."


async def test_a_resumed_parent_gets_its_finished_subagents_result_without_running_it_again(
    bus: Bus,
    fake_model: FakeOpenAI,
    nats_url: str,
    process_config: Path,
    app_config: Callable[[], AppConfig],
    tmp_path: Path,
) -> None:
    finish_task = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_r", "Count the lines of data.csv")]),
        Reply(text="data.csv has 42 lines", when="Count the lines", hold=finish_task),
        Reply(text="There are 42 lines.", when="42 lines"),
    )
    log = tmp_path / "runners.log"
    async with running_executor(nats_url, app_config()):
        async with component_process("runner", nats_url, process_config, log) as parent:
            await until(lambda: _answering(bus), "the first runner")
            request = delegate("t-kill-parent", "How many lines in data.csv?")
            await submit_run(bus, request)
            await fake_model.wait_for_requests(2, timeout=30)  # the parent waits for its subagent
            parent.send_signal(signal.SIGKILL)
            await parent.wait()
        finish_task.set()  # the subagent finishes while no runner is there
        results = await bus.kv(bus.subjects.subagent_results_bucket)
        await until(lambda: _stored(results, SubagentResult.key(request.run_id, "call_r-t1")), "the result")
        async with component_process("runner", nats_url, process_config, log):
            events = await collect_run(bus, request.run_id, timeout=90)
    asked = [r["messages"][-1]["content"] for r in fake_model.agent_requests]
    assert asked.count("Count the lines of data.csv") == 1, "the task ran once"
    assert tool_results(events)["call_r"]["additional_kwargs"]["subagent_status"] == "completed"
    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "There are 42 lines."


async def _consumer_exists(bus: Bus) -> bool:
    from agents.subagents import EXECUTOR_DURABLE

    try:
        await bus.js.consumer_info(bus.subjects.subagents_stream, EXECUTOR_DURABLE)
    except Exception:
        return False
    return True


async def _answering(bus: Bus) -> bool:
    try:
        await bus.nc.request(bus.subjects.threads("state"), b"{}", timeout=0.5)
    except Exception:
        return False
    return True


async def _stored(results: Any, key: str) -> bool:
    try:
        return bool((await results.get(key)).value)
    except Exception:
        return False
