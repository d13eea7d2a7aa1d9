"""A background task (a subagent's, or a command's: bash's `run_in_background`) started from a
Telegram chat reports into that chat after the turn ended, though the adapter process that took the
first message was SIGKILLed meanwhile: the report is a run, its answer a message on the chat's
outbound stream, and a new adapter process delivers it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from bus.messages import RunRecord
from bus.records import RecordStore
from sandbox.client import SandboxClient
from tests.channels.conftest import adapter_processes
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support.adapters import StartAdapter
from tests.support.eventually import eventually
from tests.support.subagents import running_executor, task_call

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]

REPORT = "Tides: high tide at 6pm."


def shown(telegram: FakeTelegram) -> list[str]:
    return [p["text"] for m, p in telegram.calls if m in ("sendMessage", "editMessageText")]


async def report_ended(bus: Bus, timeout: float = 60.0) -> RunRecord:
    """The run that reported the background task, once it has ended (its answer is on its way)."""
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    async with asyncio.timeout(timeout):
        while True:
            for key in await runs.keys():
                record = await runs.get(key)
                if record and "background_task" in record.metadata and record.status.finished:
                    return record
            await asyncio.sleep(0.1)  # polling the runs bucket: nothing to wait on but it changing


@pytest_asyncio.fixture
async def stack_config_file(
    nats_url: str,
    telegram: FakeTelegram,
    config_data: dict[str, Any],
    start_adapter: StartAdapter,
    config_file: Callable[[], Path],
) -> AsyncIterator[Path]:
    """Runner, sandbox broker, router and subagent executor for a Telegram chat whose adapter
    processes the test starts (and kills) on the config file given."""
    config_data["bus"]["lease_seconds"] = 3  # the killed copy's hold on the bot lapses soon
    config_data["subagents"]["timeout_seconds"] = 120
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    async with start_adapter("telegram", settings, None, {"subagent_enabled": True}) as config:
        async with running_executor(nats_url, config):
            yield config_file()


async def test_a_background_result_reaches_the_chat_through_a_new_adapter_process(
    bus: Bus,
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    nats_url: str,
    tmp_path: Path,
    stack_config_file: Path,
) -> None:
    research_done = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_tides", "Research the tides", run_in_background=True)], when="lo"),
        Reply(text="High tide at 6pm", when="Research the tides", hold=research_done),
        Reply(text="On it; I will report back.", when="Started background task"),
        Reply(text=REPORT, when="High tide at 6pm"),
    )
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    async with adapter_processes(stack_config_file, nats_url, tmp_path / "first", 1) as (first,):
        telegram.send_user_message("please look into the tides")
        for _ in range(1200):
            if "On it; I will report back." in shown(telegram):
                break
            await asyncio.sleep(0.05)  # polling the fake's calls for the reply
        else:
            pytest.fail(f"no first reply: {shown(telegram)}")
        await fake_model.wait_until(lambda: fake_model.holding == 1)  # the research goes on
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
    research_done.set()
    record = await report_ended(bus)  # answered while no adapter ran
    assert record.status.value == "success"
    assert REPORT not in shown(telegram)
    async with adapter_processes(stack_config_file, nats_url, tmp_path / "second", 1):
        for _ in range(1200):
            if REPORT in shown(telegram):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the report never reached the chat: {shown(telegram)}")
    sent = [p for m, p in telegram.calls if m == "sendMessage"]
    assert [p["chat_id"] for p in sent if p["text"] == REPORT] == [42], "once, into the chat that asked"


async def test_a_background_commands_output_reaches_the_chat_through_a_new_adapter_process(
    bus: Bus,
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    nats_url: str,
    tmp_path: Path,
    stack_config_file: Path,
) -> None:
    """bash's `run_in_background`: the command waits for a file the test writes once the adapter
    that took the message is dead; its output comes back into the chat through a new one."""
    gate = "/mnt/user-data/workspace/go"
    command = f"while [ ! -e {gate} ]; do sleep 0.1; done; echo tides-computed"
    call = ToolCall("bash", {"command": command, "run_in_background": True}, id="call_tides")
    fake_model.script(
        Reply(tool_calls=[call], when="compute"),
        Reply(text="Computing; I will report back.", when="Started background command"),
        Reply(text=REPORT, when="tides-computed"),
    )
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    async with adapter_processes(stack_config_file, nats_url, tmp_path / "first", 1) as (first,):
        telegram.send_user_message("please compute the tides")
        await eventually(lambda: "Computing; I will report back." in shown(telegram), "the first reply")
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    [asked] = [r for key in await runs.keys() if (r := await runs.get(key))]
    await SandboxClient(bus, asked.user_id, asked.thread_id).write_file(gate, "")  # the command ends
    record = await report_ended(bus)  # answered while no adapter ran
    assert record.status.value == "success"
    assert REPORT not in shown(telegram)
    async with adapter_processes(stack_config_file, nats_url, tmp_path / "second", 1):
        await eventually(lambda: REPORT in shown(telegram), "the report in the chat")
    sent = [p for m, p in telegram.calls if m == "sendMessage"]
    assert [p["chat_id"] for p in sent if p["text"] == REPORT] == [42], "once, into the chat that asked"
