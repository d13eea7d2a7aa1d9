"""The agent uses the sandbox through its tools: the runner, the broker and the fake model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus
from bus.files import output_key
from config import AppConfig
from config.loader import _build
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.runs import streamed_text
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio


async def test_an_agent_writes_runs_and_presents_a_file(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
) -> None:
    data = {**config_data, "sandbox": sandbox_config["sandbox"], "skills": sandbox_config["skills"]}
    config: AppConfig = _build(AppConfig, data, "test config")
    report = "/mnt/user-data/outputs/report.md"
    add_up = f"awk '{{s += $1}} END {{print \"sum: \" s}}' n.txt > {report}; cat {report}"
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/workspace/n.txt", "content": "3\n4\n"})
            ]
        ),
        Reply(tool_calls=[ToolCall("bash", {"command": add_up})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [report]})]),
        Reply(text="Your report is ready."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask("t-tools", "add 3 and 4 into a report", user_id="ana"))

    results = [e.data[0]["content"] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]
    assert results[0] == "Wrote 4 bytes to /mnt/user-data/workspace/n.txt"
    assert results[1] == "sum: 7"
    assert results[2] == "Presented 1 file(s) to the user."
    assert streamed_text(events).endswith("Your report is ready.")
    final = [e for e in events if e.event == "values"][-1].data
    assert final["artifacts"] == [report]
    stored = await (await bus.files()).get(output_key("ana", "t-tools", "report.md"))
    assert stored.data == b"sum: 7\n"


async def test_a_sandbox_error_reaches_the_model_as_a_failed_tool_result(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
    app_config: Callable[[], AppConfig],
) -> None:
    data = {**config_data, "sandbox": sandbox_config["sandbox"]}
    config: AppConfig = _build(AppConfig, data, "test config")
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/etc/shadow"})]),
        Reply(text="I may not read that file."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask("t-deny", "show me /etc/shadow"))
    tool = next(e.data[0] for e in events if e.event == "messages" and e.data[0]["type"] == "tool")
    assert tool["content"].startswith("Error (not_allowed): /etc/shadow is outside the sandbox")
    assert tool["status"] == "error"  # every client (UI, SDK, chat router) sees the step failed
    final = [e for e in events if e.event == "values"][-1].data
    assert [m.get("status") for m in final["messages"] if m["type"] == "tool"] == ["error"]
    assert streamed_text(events) == "I may not read that file."


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


async def test_a_vision_model_sees_an_image_it_asked_to_view_once(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
) -> None:
    from bus.files import upload_key

    data = {**config_data, "sandbox": sandbox_config["sandbox"]}
    data["models"] = [{**data["models"][0], "supports_vision": True}]
    config: AppConfig = _build(AppConfig, data, "test config")
    await (await bus.files()).put(upload_key("default", "t-img", "dot.png"), PNG)
    fake_model.script(
        Reply(tool_calls=[ToolCall("view_image", {"image_path": "/mnt/user-data/uploads/dot.png"})]),
        Reply(text="A single dot."),
        Reply(text="Still a dot."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask("t-img", "what is in my picture?"))
        await submit_and_collect(bus, ask("t-img", "and now?"))
    assert streamed_text(events) == "A single dot."
    with_image = fake_model.agent_requests[1]["messages"][-1]
    assert with_image["role"] == "user"
    urls = [b["image_url"]["url"] for b in with_image["content"] if b.get("type") == "image_url"]
    assert urls == ["data:image/png;base64," + __import__("base64").b64encode(PNG).decode()]
    later = fake_model.agent_requests[2]["messages"]
    assert not any(isinstance(m.get("content"), list) for m in later), "shown once, not carried forward"


async def test_a_model_without_vision_gets_no_view_image_tool(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
) -> None:
    config: AppConfig = _build(
        AppConfig, {**config_data, "sandbox": sandbox_config["sandbox"]}, "test config"
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        await submit_and_collect(bus, ask("t-novision", "hi"))
    tools = {t["function"]["name"] for t in fake_model.agent_requests[0]["tools"]}
    assert "view_image" not in tools
    assert {"bash", "read_file", "write_file", "ask_clarification", "present_files"} <= tools
