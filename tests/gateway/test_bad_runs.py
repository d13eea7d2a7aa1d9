"""Bad runs get a clear error: the gateway refuses every malformed `command` or `input` with a 4xx
naming the field, and submits nothing, instead of answering 200 and ending the run empty-handed.

Good commands still run: a `goto` the lead agent has, with or without an update, and LangGraph's
`Send` as the SDK writes it (`{"node", "input"}`).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import Command, Send

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.bad_runs import EMPTY_THREAD, GATEWAY_ONLY, HI, MALFORMED, UNKNOWN_ASSISTANT
from tests.support.gateway import running_gateway
from tests.support.runner import running_runner

pytestmark = pytest.mark.asyncio

ROUTES = ("/runs", "/runs/wait", "/runs/stream")
STATELESS = ROUTES[1:]
LEAD = {"assistant_id": "lead_agent"}


def refusals(cases: list[Any]) -> list[tuple[str, dict[str, Any], str]]:
    return [(case.id, *case.values) for case in cases]


async def refused(
    http: httpx.AsyncClient,
    thread: str,
    cases: list[tuple[str, dict[str, Any], str]],
    routes: tuple[str, ...] = ("/runs",),
) -> list[str]:
    """Each case sent to the thread's run routes; what was not a 422 naming its field."""
    wrong = []
    for case_id, body, field in cases:
        for route in routes:
            response = await http.post(
                f"/threads/{thread}{route}", json={"assistant_id": "lead_agent", **body}
            )
            detail = response.json().get("detail", "") if response.is_client_error else response.text[:200]
            if response.status_code != 422 or not str(detail).startswith(field):
                wrong.append(f"{case_id} {route}: {response.status_code} {detail}")
    return wrong


async def runs_of(http: httpx.AsyncClient, thread: str) -> list[dict[str, Any]]:
    listed = await http.get(f"/threads/{thread}/runs", params={"limit": 1000})
    return list(listed.json())


async def test_every_malformed_run_is_refused_with_the_field_it_gets_wrong(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(Reply(text="Hello to you."))
    answered = await http.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "lead_agent", "input": HI}
    )
    assert answered.json()["messages"][-1]["content"] == "Hello to you."
    model_calls = len(fake_model.agent_requests)

    cases = refusals(MALFORMED + GATEWAY_ONLY)
    assert await refused(http, thread, cases) == []
    # The routes that wait for the run or stream it share the check: a sample of each kind.
    assert await refused(http, thread, cases[::6], routes=ROUTES[1:]) == []
    assert len(await runs_of(http, thread)) == 1, "no malformed run was submitted"
    assert len(fake_model.agent_requests) == model_calls


async def test_runs_with_nothing_to_answer_on_a_new_thread_are_refused(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    assert await refused(http, thread, refusals(EMPTY_THREAD), routes=ROUTES) == []
    for route in STATELESS:  # a new thread each time
        response = await http.post(route, json=LEAD)
        assert (response.status_code, response.json()["detail"][:6]) == (422, "input:"), route
    assert await runs_of(http, thread) == []
    assert fake_model.agent_requests == []


async def test_an_unknown_assistant_is_not_found(http: httpx.AsyncClient, fake_model: FakeOpenAI) -> None:
    body, field = UNKNOWN_ASSISTANT.values
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    for path in [f"/threads/{thread}{route}" for route in ROUTES] + list(STATELESS):
        response = await http.post(path, json=body)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["detail"].startswith(field), path
    assert await runs_of(http, thread) == []


async def test_commands_the_lead_agent_can_follow_still_run(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    """`goto` a node with the new message as an update, and a `Send` as the SDK writes it."""
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(Reply(text="Hello to you."))
    await http.post(f"/threads/{thread}/runs/wait", json={**LEAD, "input": HI})

    fake_model.script(Reply(text="Updated and answered.", when="via update"))
    update = {"messages": [{"role": "user", "content": "via update"}]}
    done = await http.post(
        f"/threads/{thread}/runs/wait", json={**LEAD, "command": {"update": update, "goto": "model"}}
    )
    assert done.status_code == 200, done.text
    said = [(m["type"], m["content"]) for m in done.json()["messages"]]
    assert said[2:] == [("human", "via update"), ("ai", "Updated and answered.")], "each once"

    fake_model.script(Reply(text="Sent and answered.", when="via send"))
    send = {"node": "model", "input": {"messages": [{"role": "user", "content": "via send"}]}}
    done = await http.post(f"/threads/{thread}/runs/wait", json={**LEAD, "command": {"goto": [send]}})
    assert done.status_code == 200, done.text
    assert done.json()["messages"][-1]["content"] == "Sent and answered."
    assert [run["status"] for run in await runs_of(http, thread)] == ["success"] * 3


async def test_the_langgraph_sdk_gets_its_own_errors_and_its_send_runs(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    thread = (await ana.threads.create())["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as nowhere:  # what its wait raises for any status
        await ana.runs.wait(thread, "lead_agent", command={"goto": "nowhere"})
    assert nowhere.value.response.status_code == 422
    told = " ".join(getattr(nowhere.value, "__notes__", []))  # the SDK adds the body as a note
    assert "command.goto: the lead agent has no node 'nowhere'" in told
    with pytest.raises(UnprocessableEntityError) as resume:
        await ana.runs.create(thread, "lead_agent", command={"resume": "yes"})
    assert "command.resume: nothing on thread" in str(resume.value)
    with pytest.raises(NotFoundError):
        await ana.runs.create(thread, "no-such-agent", input=HI)

    fake_model.script(Reply(text="Hello to you."))
    await ana.runs.wait(thread, "lead_agent", input=HI)
    fake_model.script(Reply(text="The SDK's Send ran.", when="via the sdk"))
    send: Send = {"node": "model", "input": {"messages": [{"role": "user", "content": "via the sdk"}]}}
    command: Command = {"goto": send}
    result = await ana.runs.wait(thread, "lead_agent", command=command)
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"] == "The SDK's Send ran."


async def test_with_no_runner_to_ask_a_bad_run_is_accepted_and_ends_failed_when_a_runner_takes_it(
    nats_url: str, stack_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    async with (
        running_gateway(nats_url, stack_config) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}, timeout=60) as http,
    ):
        async with running_runner(nats_url, stack_config):
            thread = (await http.post("/threads", json={})).json()["thread_id"]
        accepted = await http.post(f"/threads/{thread}/runs", json={**LEAD, "command": {"goto": "nowhere"}})
        assert accepted.status_code == 200, accepted.text
        run = accepted.json()["run_id"]
        async with running_runner(nats_url, stack_config):
            joined = await http.get(f"/threads/{thread}/runs/{run}/join")
            failed = joined.json()["__error__"]
            assert failed["error"] == "InvalidRunRequest"
            assert "command.goto: the lead agent has no node 'nowhere'" in failed["message"]
            assert (await http.get(f"/threads/{thread}/runs/{run}")).json()["status"] == "error"
    assert fake_model.agent_requests == []
