"""Roles where the work happens: the runner offers a person only their role's tools and refuses a model
or custom agent their role lacks, for a run from any way in (here a script's RunRequest on the bus);
a role assigned meanwhile holds from the next run, and every run and refusal is in the audit trail."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from access import AuditLog, RoleBook
from bus import Bus
from config import AppConfig
from config.access import AccessConfig
from config.loader import _build
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.subagents import delegate, running_executor, task_call, tool_results


@pytest.fixture
def team_config(config_data: dict[str, Any]) -> AppConfig:
    base = config_data["models"][0]
    data = {
        **config_data,
        "models": [base, {**base, "name": "big", "model": "big-1"}],
        "sandbox": {"provider": "local"},
        "access": {
            "roles": {
                "member": {},
                "intern": {"models": ["fake"], "tools": ["group:web", "ask_clarification"], "agents": []},
            },
            "channel_roles": {"telegram": "intern"},
        },
    }
    return _build(AppConfig, data, "test config")


def tool_names(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_a_role_limits_the_tools_offered_and_refuses_a_forbidden_model(
    bus: Bus, nats_url: str, team_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    roles = await RoleBook.open(bus)
    await roles.assign("ivy", "intern", source="test")
    async with running_runner(nats_url, team_config):
        fake_model.script(Reply(text="hello ivy", when="ivy-1"), Reply(text="hello max", when="max-1"))
        await submit_and_collect(bus, ask("th-ivy", "ivy-1", user_id="ivy"))
        await submit_and_collect(bus, ask("th-max", "max-1", user_id="max"))
        offered = {r["messages"][-1]["content"]: tool_names(r) for r in fake_model.agent_requests}
        assert "bash" in offered["max-1"]  # a member: every tool
        assert "bash" not in offered["ivy-1"]
        assert "write_file" not in offered["ivy-1"]
        assert "ask_clarification" in offered["ivy-1"]

        asked = len(fake_model.agent_requests)
        events = await submit_and_collect(
            bus, ask("th-ivy-2", "big please", user_id="ivy", config={"configurable": {"model_name": "big"}})
        )
        error = next(e.data for e in events if e.event == "error")
        assert "may not use model 'big'" in error["message"]
        assert len(fake_model.agent_requests) == asked  # the model was never called

        # An admin promotes ivy: the next run may use the big model, no restart.
        await roles.assign("ivy", "member", source="admin:ana")
        fake_model.script(Reply(text="big answer", when="big again"))
        events = await submit_and_collect(
            bus, ask("th-ivy-3", "big again", user_id="ivy", config={"configurable": {"model_name": "big"}})
        )
        assert not [e for e in events if e.event == "error"]

    trail = await AuditLog(bus).read(user_id="ivy")
    assert [r.action for r in trail] == ["run_started", "run_refused", "run_started"]
    assert trail[1].detail["model"] == "big"
    assert trail[0].detail["role"] == "intern"


async def test_unlinked_chat_users_get_their_platforms_role(
    bus: Bus, nats_url: str, team_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    async with running_runner(nats_url, team_config):
        fake_model.script(Reply(text="hi", when="from telegram"))
        await submit_and_collect(bus, ask("th-tg", "from telegram", user_id="telegram:42"))
    assert "bash" not in tool_names(fake_model.agent_requests[-1])


async def test_a_persons_role_holds_in_their_subagents_too(
    bus: Bus, nats_url: str, team_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    roles = await RoleBook.open(bus)
    await roles.assign("ivy", "delegator", source="test")
    config = team_config.model_copy(
        update={
            "access": AccessConfig.model_validate(
                {"roles": {"member": {}, "delegator": {"models": ["fake"], "tools": ["task", "group:web"]}}}
            )
        }
    )
    async with running_runner(nats_url, config), running_executor(nats_url, config):
        fake_model.script(
            Reply(tool_calls=[task_call("call_a", "Look it up for ivy")]),
            Reply(text="found it", when="Look it up for ivy"),
            Reply(text="done", when="found it"),
        )
        request = delegate("th-ivy-sub", "delegate please").model_copy(update={"user_id": "ivy"})
        events = await submit_and_collect(bus, request)
    sub = next(r for r in fake_model.agent_requests if r["messages"][-1]["content"] == "Look it up for ivy")
    offered = tool_names(sub)
    assert "bash" not in offered  # the subagent is offered what ivy's role allows
    assert "write_file" not in offered
    assert "web_search" in offered
    assert "found it" in tool_results(events)["call_a"]["content"]


@pytest_asyncio.fixture
async def mcp_roles(
    bus: Bus, team_config: AppConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AppConfig:
    """Two MCP servers (notes, reports); nia's role notes_only may use the notes server's tools only,
    rex's no_notes every tool but those."""
    book = await RoleBook.open(bus)
    await book.assign("nia", "notes_only", source="test")
    await book.assign("rex", "no_notes", source="test")

    def stdio(which: str) -> dict[str, Any]:
        args = ["-m", "tests.fakes.mcp_servers", which]
        return {"type": "stdio", "command": sys.executable, "args": args, "env": {"PYTHONPATH": str(REPO)}}

    servers = {"notes": stdio("stdio"), "reports": stdio("reports")}
    extensions = tmp_path / "extensions_config.json"
    extensions.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(extensions))
    roles = {
        "member": {},
        "notes_only": {"tools": ["mcp:notes", "ask_clarification"]},
        "no_notes": {"tools": ["*", "!mcp:notes"]},
    }
    return team_config.model_copy(update={"access": AccessConfig.model_validate({"roles": roles})})


async def test_a_role_allows_or_denies_every_tool_of_one_mcp_server(
    bus: Bus, nats_url: str, mcp_roles: AppConfig, fake_model: FakeOpenAI
) -> None:
    config = mcp_roles
    async with running_runner(nats_url, config):
        fake_model.script(
            Reply(text="hi nia", when="nia-1"),
            Reply(tool_calls=[ToolCall("add_numbers", {"a": 2, "b": 3})], when="rex-1"),
            Reply(text="rex done", when="not available"),
        )
        await submit_and_collect(bus, ask("th-nia", "nia-1", user_id="nia"))
        events = await submit_and_collect(bus, ask("th-rex", "rex-1", user_id="rex"))
    offered = {r["messages"][1]["content"]: tool_names(r) for r in fake_model.agent_requests}
    assert {"add_numbers", "server_pid"} <= offered["nia-1"]  # every tool of the notes server
    assert "big_report" not in offered["nia-1"]  # none of another server's
    assert "bash" not in offered["nia-1"]
    assert "add_numbers" not in offered["rex-1"]  # everything but the notes server's
    assert {"big_report", "bash"} <= offered["rex-1"]
    # A call the model makes anyway (it saw the tool elsewhere) is refused, not run.
    assert "not available" in tool_results_of(events)["add_numbers"]
    [refused] = await AuditLog(bus).read(user_id="rex", action="tool_refused")
    assert refused.detail["tool"] == "add_numbers"
    assert refused.outcome == "refused"


def tool_results_of(events: list[Any]) -> dict[str, str]:
    values = next(e.data for e in reversed(events) if e.event == "values")
    return {m["name"]: str(m["content"]) for m in values["messages"] if m["type"] == "tool"}


async def test_deferred_mcp_tools_a_role_denies_are_neither_named_nor_found(
    bus: Bus, nats_url: str, mcp_roles: AppConfig, fake_model: FakeOpenAI
) -> None:
    config = mcp_roles.model_copy(
        update={"tool_search": mcp_roles.tool_search.model_copy(update={"enabled": True})}
    )
    async with running_runner(nats_url, config):
        fake_model.script(
            Reply(tool_calls=[ToolCall("tool_search", {"query": "add numbers"})], when="nia-2"),
            Reply(text="nia found", when="Add two numbers"),  # tool_search found add_numbers
            Reply(tool_calls=[ToolCall("tool_search", {"query": "add numbers"})], when="rex-2"),
            Reply(text="rex found nothing", when="No tool matches"),
        )
        nia = await submit_and_collect(bus, ask("th-nia-2", "nia-2", user_id="nia"))
        rex = await submit_and_collect(bus, ask("th-rex-2", "rex-2", user_id="rex"))
    assert answer_of(nia) == "nia found"
    assert answer_of(rex) == "rex found nothing"
    assert "add_numbers" in tool_results_of(nia)["tool_search"]
    assert "add_numbers" not in tool_results_of(rex)["tool_search"]
    prompts = {
        r["messages"][1]["content"]: str(r["messages"][0]["content"]) for r in fake_model.agent_requests
    }
    assert "add_numbers" in prompts["nia-2"]
    assert "big_report" not in prompts["nia-2"]
    assert "add_numbers" not in prompts["rex-2"]  # the deferred tools named: not the denied server's
    assert "big_report" in prompts["rex-2"]


def answer_of(events: list[Any]) -> str:
    values = next(e.data for e in reversed(events) if e.event == "values")
    return str(values["messages"][-1]["content"])
