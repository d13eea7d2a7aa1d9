"""Tool output budgets: a huge tool result reaches the model cut, the whole of it saved for the agent."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from config import AppConfig
from config.loader import _build
from sandbox import SandboxClient
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio

REPORTS = {
    "type": "stdio",
    "command": sys.executable,
    "args": ["-m", "tests.fakes.mcp_servers", "reports"],
    "env": {"PYTHONPATH": str(REPO)},
}


def sent_tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results in one request the model received."""
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


async def test_a_5_mb_mcp_result_reaches_the_model_cut_and_is_saved_whole_for_the_agent(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extensions = tmp_path / "extensions_config.json"
    extensions.write_text(json.dumps({"mcpServers": {"reports": REPORTS}}), encoding="utf-8")
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(extensions))
    sandbox = {**sandbox_config["sandbox"], "max_write_bytes": 8 * 1024 * 1024, "max_read_chars": 50_000}
    data = {**config_data, "sandbox": sandbox, "tool_output": {"max_chars": 20_000}}
    config: AppConfig = _build(AppConfig, data, "test config")
    fake_model.script(
        Reply(tool_calls=[ToolCall("big_report", {"megabytes": 5})]),
        Reply(text="The report is long; I kept it in a file."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask("t-big", "get the big report", user_id="ana"), 120)
        assert events[-1].data["status"] == "success"

        (seen,) = sent_tool_results(fake_model.agent_requests[1])
        assert len(seen) < 21_000, "the model got the result within its budget (and a note)"
        assert unfenced(seen).startswith("line 0000000 "), "it starts as the result starts"
        assert "NEEDLE-IN-THE-MIDDLE" not in seen, "the middle was cut"
        found = re.search(r"saved at (/mnt/user-data/outputs/tool-results/\S+\.txt)", seen)
        assert found, seen[20_000 - 2000 :]
        path = found.group(1)

        # the agent can read the whole result back, with its own tools
        client = SandboxClient(bus, "ana", "t-big")
        hits = await client.grep("NEEDLE-IN-THE-MIDDLE", path)
        assert [m.line for m in hits.matches] == [5 * 1024 * 1024 // 64 // 2 + 1]
        tail = await client.read_file(path, start_line=81920, end_line=81920)
        assert tail.content.startswith("line 0081919 ")


async def test_a_result_that_cannot_be_saved_is_still_cut_and_the_model_told_why(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    sandbox_config: dict[str, Any],
    nats_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extensions = tmp_path / "extensions_config.json"
    extensions.write_text(json.dumps({"mcpServers": {"reports": REPORTS}}), encoding="utf-8")
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(extensions))
    sandbox = {**sandbox_config["sandbox"], "max_write_bytes": 100_000}  # far less than the result
    data = {**config_data, "sandbox": sandbox, "tool_output": {"max_chars": 5_000}}
    config: AppConfig = _build(AppConfig, data, "test config")
    fake_model.script(
        Reply(tool_calls=[ToolCall("big_report", {"megabytes": 1})]),
        Reply(text="Too big to keep."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask("t-unsaved", "get the report", user_id="ana"), 60)
    assert events[-1].data["status"] == "success"
    (seen,) = sent_tool_results(fake_model.agent_requests[1])
    assert len(seen) < 6_000
    assert "could not be saved" in seen
    assert "100000-byte limit" in seen, seen[-800:]
