"""Read before write: the agent changes an existing file only after reading its current version."""

from __future__ import annotations

from typing import Any

import pytest

from bus import Bus
from config import AppConfig
from config.loader import _build
from sandbox import SandboxClient
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio

NOTES = "/mnt/user-data/workspace/notes.md"
NEW = "/mnt/user-data/workspace/new.md"


def tool_results(events: list[Any]) -> list[tuple[str, str, str | None]]:
    final = [e for e in events if e.event == "values"][-1].data
    return [(m["name"], m["content"], m.get("status")) for m in final["messages"] if m["type"] == "tool"]


async def test_changing_an_unread_file_is_refused_with_a_hint_and_allowed_after_reading_it(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
) -> None:
    data = {**config_data, "sandbox": sandbox_config["sandbox"]}
    config: AppConfig = _build(AppConfig, data, "test config")
    edit = ToolCall("str_replace", {"path": NOTES, "old_str": "draft", "new_str": "final"})
    fresh = ToolCall("write_file", {"path": NEW, "content": "hi"})
    append = ToolCall("write_file", {"path": NOTES, "content": "over", "append": True})
    fake_model.script(
        Reply(tool_calls=[fresh]),
        Reply(tool_calls=[edit], when="Wrote 2 bytes"),
        Reply(tool_calls=[ToolCall("read_file", {"path": NOTES})], when="not run"),
        Reply(tool_calls=[ToolCall("str_replace", edit.args)], when="status: draft"),
        Reply(tool_calls=[append], when=f"Replaced 1 occurrence(s) in {NOTES}"),
        Reply(tool_calls=[ToolCall("str_replace", {"path": NEW, "old_str": "hi", "new_str": "ho"})]),
        Reply(text="Done.", when=f"Replaced 1 occurrence(s) in {NEW}"),
    )
    client = SandboxClient(bus, "ana", "t-rbw")
    async with running_broker(nats_url, config):
        await client.write_file(NOTES, "status: draft\n")  # there before the agent came
        async with running_runner(nats_url, config):
            events = await submit_and_collect(bus, ask("t-rbw", "finalise my notes", user_id="ana"))
        results = tool_results(events)
        assert results[0] == ("write_file", f"Wrote 2 bytes to {NEW}", "success")
        name, refusal, status = results[1]
        assert (name, status) == ("str_replace", "error")
        assert "already exists and you have not read" in refusal
        assert "read_file" in refusal
        assert results[2][0] == "read_file"
        assert "status: draft" in results[2][1]
        assert results[3] == ("str_replace", f"Replaced 1 occurrence(s) in {NOTES}", "success")
        name, refusal, status = results[4]
        assert (name, status) == ("write_file", "error"), "after an edit, the next change needs a fresh read"
        assert results[5] == ("str_replace", f"Replaced 1 occurrence(s) in {NEW}", "success"), (
            "a file the agent wrote whole is known to it"
        )
        assert (await client.read_file(NOTES)).content == "status: final\n"
