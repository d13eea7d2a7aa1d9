"""MCP servers' tools in the agent: a real stdio server and a real streamable-HTTP one behind OAuth."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import Bus
from bus.content import text_of
from bus.runs import collect_run, submit_run
from tests.conftest import REPO
from tests.fakes.mcp_servers import OAuthMcpServer
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartRunner, StartStack, ask, running_runner, submit_and_collect

pytestmark = pytest.mark.asyncio

STDIO = {
    "type": "stdio",
    "command": sys.executable,
    "args": ["-m", "tests.fakes.mcp_servers", "stdio"],
    "env": {"PYTHONPATH": str(REPO), "NOTES_GREETING": "$NOTES_GREETING"},
}


def tool_messages(events: list[Any]) -> dict[str, str]:
    values = next(e.data for e in reversed(events) if e.event == "values")
    return {m["name"]: text_of(m["content"], sep="") for m in values["messages"] if m["type"] == "tool"}


def offered_tools(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


@pytest.fixture
def extensions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any]], None]:
    path = tmp_path / "extensions_config.json"
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(path))
    monkeypatch.setenv("NOTES_GREETING", "hello")
    monkeypatch.setenv("SOME_API_KEY", "never-for-servers")

    def write(servers: dict[str, Any]) -> None:
        path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")

    return write


async def test_tools_of_a_stdio_and_an_oauth_http_server_answer_the_agent(
    bus: Bus, fake_model: FakeOpenAI, extensions: Any, start_runner: StartRunner
) -> None:
    async with OAuthMcpServer(expires_in=30) as weather:
        oauth = {
            "token_url": weather.token_url,
            "grant_type": "client_credentials",
            "client_id": "antler",
            "client_secret": "s3cret",
            "refresh_skew_seconds": 60,  # a token living 30 s is always about to expire: fetched anew
        }
        extensions({"notes": STDIO, "weather": {"type": "http", "url": weather.url, "oauth": oauth}})
        fake_model.script(
            Reply(
                tool_calls=[ToolCall("add_numbers", {"a": 2, "b": 3}), ToolCall("forecast", {"city": "Oslo"})]
            ),
            Reply(tool_calls=[ToolCall("server_environment", {})], when="sunny in Oslo"),
            Reply(text="5, and sunny in Oslo."),
        )
        async with start_runner():
            events = await submit_and_collect(bus, ask("t-mcp", "add 2 and 3, and the weather in Oslo"))
        assert {"add_numbers", "forecast", "server_environment"} <= offered_tools(
            fake_model.agent_requests[0]
        )
        results = tool_messages(events)
        assert results["add_numbers"] == "the sum is 5"
        assert results["forecast"] == "sunny in Oslo"
        environment = results["server_environment"]
        assert "NOTES_GREETING" in environment, "the server's own env reaches it"
        assert "SOME_API_KEY" not in environment, "secrets of the runner do not"
        assert len(weather.token_requests) >= 2, "a token, then a fresh one before it expired"
        assert {r["grant_type"] for r in weather.token_requests} == {"client_credentials"}


async def test_a_server_that_cannot_start_is_reported_and_the_run_goes_on(
    bus: Bus, fake_model: FakeOpenAI, extensions: Any, start_runner: StartRunner
) -> None:
    extensions({"broken": {"type": "stdio", "command": "/no/such/mcp-server"}, "notes": STDIO})
    fake_model.script(Reply(tool_calls=[ToolCall("add_numbers", {"a": 1, "b": 1})]), Reply(text="Two."))
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-broken", "1+1?"))
        settings = await bus.kv(bus.subjects.settings_bucket)
        keys = [k for k in await settings.keys() if k.startswith("mcp_status.")]
        report = json.loads((await settings.get(keys[0])).value)
    assert events[-1].data["status"] == "success"
    assert tool_messages(events)["add_numbers"] == "the sum is 2"
    assert report["servers"]["broken"]["ok"] is False
    assert "/no/such/mcp-server" in report["servers"]["broken"]["error"]
    assert report["servers"]["notes"]["ok"] is True
    # the settings page lists the status per process by this name: a person can tell which it is
    assert re.fullmatch(r"runner on \S+ \(pid \d+\)( #\d+)?", report["process"]), report["process"]


async def test_a_stdio_server_that_fails_to_start_is_reported_with_what_it_said(
    bus: Bus, fake_model: FakeOpenAI, extensions: Any, start_runner: StartRunner
) -> None:
    complaint = "import sys; print('notes folder /srv/notes is missing', file=sys.stderr); sys.exit(3)"
    extensions({"notes": {"type": "stdio", "command": sys.executable, "args": ["-c", complaint]}})
    fake_model.script(Reply(text="Fine."))
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-said", "hello"))
        settings = await bus.kv(bus.subjects.settings_bucket)
        keys = [k for k in await settings.keys() if k.startswith("mcp_status.")]
        report = json.loads((await settings.get(keys[0])).value)
    assert events[-1].data["status"] == "success"
    status = report["servers"]["notes"]
    assert status["ok"] is False
    # the cause, not just the client's "Connection closed"
    assert "notes folder /srv/notes is missing" in status["error"], status["error"]


async def test_a_server_added_through_the_gateway_reaches_every_runner(
    bus: Bus,
    fake_model: FakeOpenAI,
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Any,
    extensions: Any,
) -> None:
    from tests.support.gateway import running_gateway

    extensions({})
    config_data["gateway"] = {"port": 0}
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_runner(nats_url, config),
        running_gateway(nats_url, config) as base,
        httpx.AsyncClient(base_url=f"{base}/api", timeout=30) as http,
    ):
        added = await http.put("/mcp/config", json={"mcp_servers": {"notes": STDIO}})
        assert added.status_code == 200, added.text
        for _ in range(400):  # both runner processes load it as soon as it is published
            status = (await http.get("/mcp/config")).json()["status"]
            if len(status.get("notes", {})) == 2 and all(s["ok"] for s in status["notes"].values()):
                break
            await asyncio.sleep(0.05)
        assert len(status["notes"]) == 2, status
        assert all(
            s["tools"] == ["add_numbers", "server_pid", "server_environment"]
            for s in status["notes"].values()
        )
        fake_model.script(Reply(tool_calls=[ToolCall("add_numbers", {"a": 20, "b": 22})]), Reply(text="42."))
        events = await submit_and_collect(bus, ask("t-added", "20+22?"))
        assert tool_messages(events)["add_numbers"] == "the sum is 42"
        broken = {"notes": STDIO, "broken": {"type": "stdio", "command": "/no/such/mcp-server"}}
        await http.put("/mcp/config", json={"mcp_servers": broken})
        for _ in range(400):  # reported by both runners as soon as they tried
            failures = (await http.get(f"{base}/health")).json()["mcp_failures"]
            if failures.get("broken") == 2:
                break
            await asyncio.sleep(0.05)
        assert failures == {"broken": 2}, "health names it (and in how many processes)"
        why = (await http.get("/mcp/config")).json()["status"]["broken"]
        assert all("/no/such/mcp-server" in state["error"] for state in why.values())
        removed = await http.patch("/mcp/config", json={"mcp_servers": {"notes": None, "broken": None}})
        assert removed.json()["mcp_servers"] == {}


async def test_deferred_tools_are_bound_only_after_tool_search_found_them(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], extensions: Any, start_runner: StartRunner
) -> None:
    extensions({"notes": STDIO})
    config_data["tool_search"] = {"enabled": True}
    fake_model.script(
        Reply(tool_calls=[ToolCall("tool_search", {"query": "add numbers"})]),
        Reply(tool_calls=[ToolCall("add_numbers", {"a": 4, "b": 5})], when="Add two numbers"),
        Reply(text="Nine."),
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-deferred", "4+5 with your tools"))
        fake_model.script(Reply(text="Still here."))
        await submit_and_collect(bus, ask("t-deferred", "and now?"))
    first, second, *_ = fake_model.agent_requests
    assert "tool_search" in offered_tools(first)
    assert "add_numbers" not in offered_tools(first), "only its name, in the instructions"
    assert "add_numbers" in first["messages"][0]["content"]
    assert "add_numbers" in offered_tools(second)
    assert "server_environment" not in offered_tools(second), "what was not found stays unbound"
    assert tool_messages(events)["add_numbers"] == "the sum is 9"
    assert "add_numbers" in offered_tools(fake_model.agent_requests[-1]), "the thread remembers its finds"


async def test_oauth_with_a_refresh_token_keeps_the_newest_one_and_recovers_from_a_revoked_token() -> None:
    from agents.tools.mcp import McpOAuth

    async with OAuthMcpServer(expires_in=3600) as weather:
        auth = McpOAuth(
            {"token_url": weather.token_url, "grant_type": "refresh_token", "refresh_token": "first-refresh"}
        )
        probe = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(auth=auth) as client:
            assert (await client.post(weather.url, json=probe, headers=headers)).status_code != 401
            weather.revoke()  # the server forgets every token it gave out
            assert (await client.post(weather.url, json=probe, headers=headers)).status_code != 401
        sent = [r.get("refresh_token") for r in weather.token_requests]
        assert sent == ["first-refresh", "refresh-tok-1"], "each refresh uses the token the last one returned"


async def test_names_two_servers_share_are_prefixed_and_subagents_get_mcp_tools_too(
    bus: Bus, fake_model: FakeOpenAI, extensions: Any, start_stack: StartStack
) -> None:
    from tests.support.subagents import delegate, running_executor, task_call, tool_results

    extensions({"notes": STDIO, "backup": STDIO})
    fake_model.script(
        Reply(tool_calls=[task_call("call_m", "Add 6 and 7 with the notes server")]),
        Reply(tool_calls=[ToolCall("notes_add_numbers", {"a": 6, "b": 7})], when="Add 6 and 7"),
        Reply(text="It is 13.", when="the sum is 13"),
        Reply(text="The subagent says 13."),
    )
    async with start_stack(running_runner, running_executor):
        request = delegate("t-mcp-sub", "What is 6+7? Ask a subagent.")
        await submit_run(bus, request)
        events = await collect_run(bus, request.run_id)
    lead, subagent = fake_model.agent_requests[0], fake_model.agent_requests[1]
    both = {
        "notes_add_numbers",
        "backup_add_numbers",
        "notes_server_environment",
        "backup_server_environment",
    }
    assert both <= offered_tools(lead)
    assert "add_numbers" not in offered_tools(lead)
    assert both <= offered_tools(subagent)
    assert tool_results(events)["call_m"]["additional_kwargs"]["subagent_result_brief"] == "It is 13."


async def test_a_server_that_dies_is_started_again_for_the_next_run(
    bus: Bus,
    fake_model: FakeOpenAI,
    extensions: Any,
    monkeypatch: pytest.MonkeyPatch,
    start_runner: StartRunner,
) -> None:
    import os
    import signal

    import agents.tools.mcp

    monkeypatch.setattr(agents.tools.mcp, "RESTART_AFTER", 0.0)
    monkeypatch.setattr(agents.tools.mcp, "PING_EVERY", 0.2)
    extensions({"notes": STDIO})
    fake_model.script(Reply(tool_calls=[ToolCall("server_pid", {})]), Reply(text="Got it."))
    async with start_runner():
        first = await submit_and_collect(bus, ask("t-dies", "your pid?"))
        pid = int(tool_messages(first)["server_pid"])
        os.kill(pid, signal.SIGKILL)
        fake_model.script(Reply(tool_calls=[ToolCall("add_numbers", {"a": 1, "b": 2})]), Reply(text="3."))
        for _ in range(100):  # the runner notices its session ended
            await asyncio.sleep(0.05)
            second = await submit_and_collect(bus, ask("t-dies", "1+2?"))
            if tool_messages(second)["add_numbers"] == "the sum is 3":
                break
            fake_model.script(Reply(tool_calls=[ToolCall("add_numbers", {"a": 1, "b": 2})]), Reply(text="3."))
    assert tool_messages(second)["add_numbers"] == "the sum is 3", "a new server process answers"


def test_braced_references_are_refused_so_the_runners_secrets_stay_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agents.tools.mcp import connection
    from config import extensions_from

    monkeypatch.setenv("NOTES_GREETING", "hello")
    servers = {
        "plain": {**STDIO},
        "sneaky": {**STDIO, "env": {"LEAK": "${OPENAI_API_KEY}"}},
        "headers": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "${SECRET}"}},
    }
    found = extensions_from({"mcpServers": servers}, "test").mcp_servers
    assert connection("plain", found["plain"])["env"]["NOTES_GREETING"] == "hello"
    for name in ("sneaky", "headers"):
        with pytest.raises(ValueError, match="write \\$NAME"):
            connection(name, found[name])
