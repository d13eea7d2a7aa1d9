"""Tool-call approvals: a call the rules mark "ask" pauses the run durably; a resume answers it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.graph.approvals import ApprovalPolicy, decision_of
from bus import Bus
from bus.approvals import answer_run_id
from bus.messages import RunCommand, RunRequest
from bus.runs import collect_run
from config import ApprovalsConfig
from tests.conftest import finished
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import AntlerCli, StartRunner, StartStack, ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker
from tests.support.schedules import running_scheduler

BASH_ASKS = {"enabled": True, "rules": [{"tools": ["bash"], "action": "ask", "unless_command": [r"ls\b"]}]}


def messages(events: list[Any]) -> list[dict[str, Any]]:
    return next(e.data for e in reversed(events) if e.event == "values")["messages"]


def approvals(events: list[Any]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.event == "approval"]


def resume(thread_id: str, answer: Any) -> RunRequest:
    return RunRequest(thread_id=thread_id, command=RunCommand(resume=answer), stream_mode=["values"])


@pytest.mark.parametrize(
    ("tool", "args", "action"),
    [
        pytest.param("bash", {"command": "echo hi"}, "ask", id="bash-asks"),
        pytest.param("bash", {"command": "ls -la /mnt"}, "run", id="allowlisted-command-runs"),
        pytest.param("read_file", {"path": "/x"}, "run", id="unlisted-tool-runs"),
        pytest.param("write_file", {"path": "/x"}, "refuse", id="pattern-refuses"),
    ],
)
def test_the_first_matching_rule_decides(tool: str, args: dict[str, Any], action: str) -> None:
    config = ApprovalsConfig.model_validate(
        {**BASH_ASKS, "rules": [*BASH_ASKS["rules"], {"tools": ["write_*"], "action": "refuse"}]}
    )
    assert ApprovalPolicy(config).action(tool, args) == action


def test_a_rule_with_roles_is_only_for_people_of_those_roles() -> None:
    rules = [{"tools": ["bash"], "roles": ["member"]}, {"tools": ["bash"], "action": "run"}]
    policy = ApprovalPolicy(ApprovalsConfig.model_validate({"rules": rules}))
    assert policy.action("bash", {"command": "make"}, role="member") == "ask"
    assert policy.action("bash", {"command": "make"}, role="admin") == "run"


def test_mcp_rules_match_the_tools_server() -> None:
    policy = ApprovalPolicy(ApprovalsConfig.model_validate({"rules": [{"tools": ["mcp:github"]}]}))
    assert policy.action("create_issue", {}, mcp_server="github") == "ask"
    assert policy.action("create_issue", {}, mcp_server="notes") == "run"


@pytest.mark.parametrize(
    ("answer", "approved"),
    [
        ("approve", True),
        ({"decision": "deny", "reason": "no"}, False),
        ([{"type": "accept", "args": None}], True),
        ({"type": "ignore"}, False),
        (True, True),
        ("whatever", False),
        ("always", True),
        ({"decision": "always"}, True),
    ],
)
def test_answers_in_the_shapes_clients_send(answer: Any, approved: bool) -> None:
    assert decision_of(answer).approved is approved


@pytest.mark.asyncio
async def test_a_bash_call_waits_for_approval_and_runs_once_approved_on_another_runner(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    start_stack: StartStack,
    start_runner: StartRunner,
) -> None:
    config_data["approvals"] = BASH_ASKS
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo approved-and-ran"})]),
        Reply(text="It printed what you asked.", when="approved-and-ran"),
    )
    async with start_stack(running_broker):
        async with start_runner():
            first = await submit_and_collect(bus, ask("t-approve", "say it"))
        # The runner that asked is gone: nothing waits in a process, the checkpoint keeps the request.
        [request] = approvals(first)
        assert request["tool"] == "bash"
        assert request["description"] == "bash: echo approved-and-ran"
        assert first[-1].data["status"] == "success"
        assert not [m for m in messages(first) if m["type"] == "tool"]  # nothing ran yet
        async with start_runner():
            second = await submit_and_collect(bus, resume("t-approve", {"decision": "approve"}))
    [result] = [m for m in messages(second) if m["type"] == "tool"]
    assert "approved-and-ran" in result["content"]
    assert messages(second)[-1]["content"] == "It printed what you asked."
    assert not approvals(second)


@pytest.mark.asyncio
async def test_a_denied_call_is_not_run_and_the_model_reads_why(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["approvals"] = BASH_ASKS
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo never"})]),
        Reply(text="Understood, I will not.", when="not run"),
    )
    async with start_runner():
        await submit_and_collect(bus, ask("t-deny", "say it"))
        second = await submit_and_collect(bus, resume("t-deny", "deny too risky"))
        again = await submit_and_collect(bus, resume("t-deny", "approve"))
    [result] = [m for m in messages(second) if m["type"] == "tool"]
    assert result["status"] == "error"
    assert "the user denied this call: too risky" in result["content"]
    assert messages(second)[-1]["content"] == "Understood, I will not."
    # An answer that comes again finds nothing waiting: applied once.
    assert again[-1].data["status"] == "error"
    assert any("nothing on thread t-deny waits" in str(e.data) for e in again if e.event == "error")


@pytest.mark.asyncio
async def test_an_unanswered_request_expires_into_a_denial_the_model_reads(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_stack: StartStack
) -> None:
    config_data["approvals"] = {**BASH_ASKS, "timeout_seconds": 1}
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo too-late"})], when="expire me"),
        Reply(text="Nobody said yes, so I did not run it.", when="in time"),
    )
    async with start_stack(running_runner, running_scheduler):
        first = await submit_and_collect(bus, ask("t-expire", "expire me"))
        [request] = approvals(first)
        # Fired by the server when the time is up: the request's one answer run, a denial.
        expired = await collect_run(bus, answer_run_id("t-expire", request["approval_id"]), timeout=30)
    [result] = [m for m in messages(expired) if m["type"] == "tool"]
    assert result["status"] == "error"
    assert "nobody answered the approval request in time" in result["content"]
    assert messages(expired)[-1]["content"] == "Nobody said yes, so I did not run it."


@pytest.mark.asyncio
async def test_a_runner_sigkilled_while_the_approval_waits_loses_nothing_and_the_call_runs_once(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    start_runner: StartRunner,
    counted_calls: Callable[[], list[str]],
    antler_cli: AntlerCli,
) -> None:
    config_data["approvals"] = {"enabled": True, "rules": [{"tools": ["count_calls"], "action": "ask"}]}
    fake_model.script(
        Reply(tool_calls=[ToolCall("count_calls", {"note": "once"})]),
        Reply(text="Counted, once.", when="counted: once"),
    )
    request = ask("t-approve-kill", "count it")
    doomed = await antler_cli("run", "runner")
    try:
        first = await submit_and_collect(bus, request)
    finally:
        doomed.kill()  # SIGKILL while the request waits for a person
        await finished(doomed)
    [asked] = approvals(first)

    async with start_runner():
        answered = await submit_and_collect(bus, resume("t-approve-kill", "approve"))
    assert messages(answered)[-1]["content"] == "Counted, once."
    assert counted_calls() == ["once"]
    assert asked["tool"] == "count_calls"


@pytest.mark.asyncio
async def test_approved_always_the_tool_asks_no_more_in_that_thread(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_stack: StartStack
) -> None:
    config_data["approvals"] = BASH_ASKS
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo first-time"})], when="first"),
        Reply(text="Done once.", when="first-time"),
        Reply(tool_calls=[ToolCall("bash", {"command": "echo second-time"})], when="again"),
        Reply(text="Done again, unasked.", when="second-time"),
    )
    async with start_stack(running_runner, running_broker):
        await submit_and_collect(bus, ask("t-always", "first"))
        await submit_and_collect(bus, resume("t-always", "approve always"))
        again = await submit_and_collect(bus, ask("t-always", "again"))
    assert not approvals(again)
    assert messages(again)[-1]["content"] == "Done again, unasked."
