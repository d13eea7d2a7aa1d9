"""Guardrails: a denied tool call becomes an error the model reads, and the run goes on."""

from __future__ import annotations

from typing import Any

import pytest

from agents.graph.guardrails import ToolCallCheck, Verdict, make_provider
from bus import Bus
from config import GuardrailsConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartRunner, ask, submit_and_collect

pytestmark = pytest.mark.asyncio


class OnlyForAna:
    """A provider of one's own: built from the guardrails section, with an extra key of its own."""

    def __init__(self, config: GuardrailsConfig) -> None:
        self.user = (config.model_extra or {})["only_user"]

    async def check(self, call: ToolCallCheck) -> Verdict:
        if call.user_id == self.user:
            return Verdict(True)
        return Verdict(False, f"{call.name} is only for {self.user}")


def tool_results(events: list[Any]) -> list[dict[str, Any]]:
    values = next(e.data for e in reversed(events) if e.event == "values")
    return [m for m in values["messages"] if m["type"] == "tool"]


async def test_a_denied_command_is_an_error_the_model_sees_and_the_run_completes(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["guardrails"] = {"enabled": True, "denied_commands": [r"rm\s+-rf"]}
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /mnt/user-data/workspace"})]),
        Reply(text="I was not allowed to delete that.", when="not run"),
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-guard", "delete everything"))
    [denied] = tool_results(events)
    assert denied["status"] == "error"
    assert "commands matching 'rm\\\\s+-rf' are not allowed here" in denied["content"]
    assert events[-1].data["status"] == "success"
    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "I was not allowed to delete that."


async def test_a_provider_of_ones_own_decides_per_user(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["guardrails"] = {
        "enabled": True,
        "use": "tests.agents.test_guardrails:OnlyForAna",
        "only_user": "ana",
    }
    fake_model.script(
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/a.txt"]})]),
        Reply(text="Not for you."),
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-own", "show me the file", user_id="bob"))
    [denied] = tool_results(events)
    assert "present_files is only for ana" in denied["content"]


async def test_a_config_naming_the_provider_by_its_old_path_still_denies() -> None:
    """`use: agents.guardrails:AllowlistProvider` (the path before `agents/graph/`) still works."""
    section = GuardrailsConfig(enabled=True, use="agents.guardrails:AllowlistProvider", denied_tools=["bash"])
    provider = make_provider(section)

    verdict = await provider.check(ToolCallCheck("bash", {"command": "ls"}, "ana", "t-1"))

    assert verdict == Verdict(False, "the tool bash is not allowed here")
