"""Calls DeerFlow's unmodified web UI makes, answered the way it expects (against the real gateway).

The UI's flows these stand for: a new chat with an attachment (upload, then create the thread, then
run), the badge of changed files after each run, auth-disabled mode's `/auth/me`, and reopening a
thread whose answer was stopped (its SDK reads the head checkpoint's task errors as the chat's error).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway import running_gateway, with_gateway
from tests.support.runner import running_runner

HI = {"messages": [{"role": "user", "content": "hi"}]}


async def test_a_new_chat_with_an_attachment_creates_its_thread_after_the_upload(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    # DeerFlow's UI: the upload first (which makes the thread), then its SDK's create, no `if_exists`
    thread = "new-chat-with-a-file"
    files = {"files": ("notes.txt", b"deer facts\n", "text/plain")}
    assert (await http.post(f"/threads/{thread}/uploads", files=files)).status_code == 200
    created = await http.post("/threads", json={"thread_id": thread})
    assert created.status_code == 200, created.text
    assert created.json()["thread_id"] == thread
    fake_model.script(Reply(text="I read your notes."))
    run = await http.post(f"/threads/{thread}/runs/wait", json={"input": HI})
    assert run.status_code == 200, run.text
    listed = (await http.get(f"/threads/{thread}/uploads/list")).json()
    assert [f["filename"] for f in listed["files"]] == ["notes.txt"], "the attachment is still there"


async def test_creating_a_thread_that_exists_keeps_langgraphs_semantics(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    # an explicit `raise` is always a 409, even for a thread only an upload made
    files = {"files": ("a.txt", b"a", "text/plain")}
    await http.post("/threads/uploaded-only/uploads", files=files)
    explicit = await http.post("/threads", json={"thread_id": "uploaded-only", "if_exists": "raise"})
    assert explicit.status_code == 409
    # a thread made by a create is a 409 on the second create (LangGraph's default is `raise`)
    assert (await http.post("/threads", json={"thread_id": "made-twice"})).status_code == 200
    assert (await http.post("/threads", json={"thread_id": "made-twice"})).status_code == 409
    # and so is an uploaded-to thread once a run has used it
    fake_model.script(Reply(text="ok"))
    await http.post("/threads/uploaded-only/runs/wait", json={"input": HI})
    assert (await http.post("/threads", json={"thread_id": "uploaded-only"})).status_code == 409
    kept = await http.post("/threads", json={"thread_id": "uploaded-only", "if_exists": "do_nothing"})
    assert kept.status_code == 200


async def test_workspace_changes_answers_after_every_run(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, api_url: str
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(Reply(text="done"))
    await http.post(f"/threads/{thread}/runs/wait", json={"input": HI})
    run_id = (await http.get(f"/threads/{thread}/runs")).json()[0]["run_id"]
    answer = await http.get(
        f"/threads/{thread}/runs/{run_id}/workspace-changes", params={"include_diff": "true"}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["available"] is False  # the run wrote no files: DeerFlow's UI shows no badge
    assert body["files"] == []
    assert body["summary"]["created"] == body["summary"]["modified"] == 0
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        assert (await bob.get(f"/threads/{thread}/runs/{run_id}/workspace-changes")).status_code == 404
    assert (await http.get(f"/threads/{thread}/runs/no-such-run/workspace-changes")).status_code == 404


async def test_a_stopped_run_leaves_no_error_for_the_ui_to_show_after_a_reload(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="a long answer " * 200, chunk_delay=0.05))
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    modes = ["values", "messages-tuple"]
    run = (await http.post(f"/threads/{thread}/runs", json={"input": HI, "stream_mode": modes})).json()
    path = f"/threads/{thread}/runs/{run['run_id']}"
    async with http.stream("GET", f"{path}/stream") as events:
        async for line in events.aiter_lines():  # the answer is being written: Stop is pressed now
            if line.startswith("data:") and "long" in line:
                stopped = await http.post(f"{path}/cancel", params={"action": "interrupt"})
                assert stopped.status_code in (200, 202, 204), stopped.text
                break
    await http.get(f"{path}/join")
    assert (await http.get(path)).json()["status"] == "interrupted"
    # what the UI reads on reopening the chat: the newest checkpoint (history, limit 1) and the state
    head = (await http.post(f"/threads/{thread}/history", json={"limit": 1})).json()[0]
    state = (await http.get(f"/threads/{thread}/state")).json()
    for snapshot in (head, state):
        # a stop is not a failure: no task error, so the UI's composer is ready (not an error cross)
        assert [task.get("error") for task in snapshot["tasks"]] == [None] * len(snapshot["tasks"])
        assert snapshot["values"]["messages"][0]["type"] == "human"


async def test_a_failed_run_still_shows_its_error_in_the_state(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*[Reply(text="upstream overloaded", status=503)] * 5)  # every try (model_calls)
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    await http.post(f"/threads/{thread}/runs/wait", json={"input": HI})
    state = (await http.get(f"/threads/{thread}/state")).json()
    assert any(task.get("error") for task in state["tasks"]), state["tasks"]


@pytest_asyncio.fixture
async def open_url(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    config = with_gateway(stack_config, tokens=[])
    async with running_runner(nats_url, config), running_gateway(nats_url, config) as base:
        yield base


async def test_auth_me_in_auth_disabled_mode_is_deerflows_synthetic_user(open_url: str) -> None:
    async with httpx.AsyncClient(base_url=open_url) as anyone:
        me = await anyone.get("/api/v1/auth/me")
    # exactly what DeerFlow's real-backend contract spec (auth-disabled-contract.spec.ts) expects
    assert me.json() == {
        "id": "default",
        "email": "default@test.local",
        "system_role": "admin",
        "needs_setup": False,
        "oauth_provider": None,
    }


@pytest.mark.parametrize(
    ("prefix", "context"),
    [
        # what arrives through Next.js' rewrite (`/api/langgraph/*` -> `/api/*`): the UI's run context
        ("/api", {"mode": "flash", "thinking_enabled": False, "is_plan_mode": False, "model_name": "fake"}),
        ("/api/langgraph", {}),  # a proxy that passes the UI's path on unchanged
    ],
)
async def test_deerflows_ui_sees_a_goals_continuations_in_the_run_it_streams(
    api_url: str, http: httpx.AsyncClient, fake_model: FakeOpenAI, prefix: str, context: dict
) -> None:
    # DeerFlow continues a goal inside the run the UI streams (its worker loops); its UI follows
    # no other run. So for its calls the stream goes on with each continuation run, and ends once,
    # when the goal is done.
    async with httpx.AsyncClient(
        base_url=f"{api_url}{prefix}", headers={"x-api-key": "tok-ana"}, timeout=30
    ) as ui:
        thread = (await ui.post("/threads", json={})).json()["thread_id"]
        # its `/goal` command: the REST API, under `/api`
        await http.put(f"/threads/{thread}/goal", json={"objective": "Count the does and the stags"})
        fake_model.script(Reply(text="Twelve does."), Reply(text="Five stags.", when="count the stags"))
        fake_model.verdicts(
            {"verdict": "continue", "reason": "stags missing", "next_step": "count the stags"},
            {"verdict": "done"},
        )
        body = {
            "input": {"messages": [{"role": "user", "content": "Count the herd"}]},
            "stream_mode": ["values", "messages-tuple", "custom", "updates"],
            "stream_subgraphs": True,
            "stream_resumable": True,
            "context": context,
        }
        events: list[tuple[str, str]] = []
        async with ui.stream("POST", f"/threads/{thread}/runs/stream", json=body) as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[len("event: ") :]
                elif line.startswith("data: "):
                    events.append((event, line[len("data: ") :]))
    names = [name for name, _ in events]
    assert names.count("end") == 1
    assert names[-1] == "end"
    assert json.loads(events[-1][1])["goal"]["verdict"] == "done"
    assert any("Five stags." in data for name, data in events if name == "values")
    assert names.count("metadata") == 1  # one run, as the UI sees it
    # Antler's own clients (`/api`, options in `config.configurable`) keep one run per stream
    # and follow `next_run_id` themselves (test_goal.py)
