"""The LangGraph-compatible API, driven by the unmodified langgraph_sdk async client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from bus import Bus, decode
from bus.messages import ThreadRecord
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway import id_order, sse_frames, streamed_answer

pytestmark = pytest.mark.asyncio

HI = {"messages": [{"role": "user", "content": "Hello there"}]}


def text_of_stream(parts: list[Any]) -> str:
    text = ""
    for part in parts:
        if part.event == "messages":
            chunk = part.data[0]
            if chunk.get("type") == "AIMessageChunk" and isinstance(chunk.get("content"), str):
                text += chunk["content"]
    return text


async def test_assistants_search_and_get(ana: LangGraphClient) -> None:
    found = await ana.assistants.search()
    assert [a["assistant_id"] for a in found] == ["lead_agent"]
    assert (await ana.assistants.get("lead_agent"))["graph_id"] == "lead_agent"


async def test_a_streamed_run_assembles_into_the_answer_and_the_state_has_it(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="General Kenobi, nice to meet you."))
    thread = await ana.threads.create(metadata={"topic": "greetings"})
    parts = [
        part
        async for part in ana.runs.stream(
            thread["thread_id"], "lead_agent", input=HI, stream_mode=["messages-tuple", "values", "updates"]
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    assert {"messages", "values", "updates"} <= set(events)
    assert text_of_stream(parts) == "General Kenobi, nice to meet you."
    final_values = [p.data for p in parts if p.event == "values"][-1]
    assert final_values["messages"][-1]["content"] == "General Kenobi, nice to meet you."

    state = await ana.threads.get_state(thread["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
    assert state["values"]["title"]
    history = await ana.threads.get_history(thread["thread_id"])
    assert len(history) >= 2
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    fetched = await ana.threads.get(thread["thread_id"])
    assert fetched["status"] == "idle"
    assert fetched["metadata"] == {"topic": "greetings"}


async def test_wait_returns_the_final_state(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="Forty-two."))
    thread = await ana.threads.create()
    result = await ana.runs.wait(thread["thread_id"], "lead_agent", input=HI)
    assert result["messages"][-1]["content"] == "Forty-two."


async def test_stateless_wait_and_stream(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="one"), Reply(text="two words"))
    result = await ana.runs.wait(None, "lead_agent", input=HI)
    assert result["messages"][-1]["content"] == "one"
    parts = [p async for p in ana.runs.stream(None, "lead_agent", input=HI, stream_mode="messages-tuple")]
    assert text_of_stream(parts) == "two words"


async def test_create_then_join_and_list(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="joined later", delay=0.3))
    thread = await ana.threads.create()
    run = await ana.runs.create(thread["thread_id"], "lead_agent", input=HI)
    assert run["status"] == "pending"
    result = await ana.runs.join(thread["thread_id"], run["run_id"])
    assert result["messages"][-1]["content"] == "joined later"
    assert (await ana.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
    runs = await ana.runs.list(thread["thread_id"])
    assert [r["run_id"] for r in runs] == [run["run_id"]]


async def test_cancel_a_running_run(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="never", delay=30))
    thread = await ana.threads.create()
    run = await ana.runs.create(thread["thread_id"], "lead_agent", input=HI)
    await fake_model.wait_for_requests(1)
    await ana.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert (await ana.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    assert (await ana.threads.get(thread["thread_id"]))["status"] == "idle"


async def test_reject_on_a_busy_thread_is_a_409(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="slow", delay=2))
    thread = await ana.threads.create()
    await ana.runs.create(thread["thread_id"], "lead_agent", input=HI)
    await fake_model.wait_for_requests(1)
    with pytest.raises(ConflictError):
        await ana.runs.create(thread["thread_id"], "lead_agent", input=HI, multitask_strategy="reject")


async def test_threads_search_filters_by_metadata_and_status(ana: LangGraphClient) -> None:
    a = await ana.threads.create(metadata={"project": "x"})
    await ana.threads.create(metadata={"project": "y"})
    found = await ana.threads.search(metadata={"project": "x"})
    assert [t["thread_id"] for t in found] == [a["thread_id"]]
    assert len(await ana.threads.search(status="idle", limit=1)) == 1
    await ana.threads.update(a["thread_id"], metadata={"starred": True})
    assert (await ana.threads.get(a["thread_id"]))["metadata"] == {"project": "x", "starred": True}


async def test_search_shows_what_runs_did_to_a_thread_and_runs_list_newest_first(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    older = await ana.threads.create()
    thread = await ana.threads.create()
    first = await ana.runs.wait(thread["thread_id"], "lead_agent", input=HI)
    assert first["title"]
    runs = [await ana.runs.create(thread["thread_id"], "lead_agent", input=HI) for _ in range(2)]
    for run in runs:
        await ana.runs.join(thread["thread_id"], run["run_id"])
    listed = await ana.runs.list(thread["thread_id"], limit=2)
    assert [r["run_id"] for r in listed] == [runs[1]["run_id"], runs[0]["run_id"]]
    assert len(await ana.runs.list(thread["thread_id"], offset=2)) == 1
    assert len(await ana.runs.list(thread["thread_id"], status="success")) == 3
    for _ in range(100):  # the runner's last write reaches the gateway's view of the threads
        found = await ana.threads.search(sort_by="updated_at", sort_order="desc")
        if found[0]["status"] == "idle" and found[0]["values"].get("title"):
            break
        await asyncio.sleep(0.05)
    assert [t["thread_id"] for t in found] == [thread["thread_id"], older["thread_id"]]
    assert found[0]["values"]["title"] == first["title"]
    await ana.threads.delete(older["thread_id"])
    assert [t["thread_id"] for t in await ana.threads.search()] == [thread["thread_id"]]


async def test_update_state_and_delete(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    thread = await ana.threads.create()
    await ana.runs.wait(thread["thread_id"], "lead_agent", input=HI)
    await ana.threads.update_state(thread["thread_id"], {"title": "Renamed"})
    assert (await ana.threads.get_state(thread["thread_id"]))["values"]["title"] == "Renamed"
    # The thread list shows the new title at once (DeerFlow's UI renames through the state).
    for _ in range(100):  # the search view follows the record through a KV watch
        found = await ana.threads.search(select=["thread_id", "values"])
        if [t["values"].get("title") for t in found if t["thread_id"] == thread["thread_id"]] == ["Renamed"]:
            break
        await asyncio.sleep(0.05)
    assert [t["values"].get("title") for t in found if t["thread_id"] == thread["thread_id"]] == ["Renamed"]
    await ana.threads.delete(thread["thread_id"])
    with pytest.raises(NotFoundError):
        await ana.threads.get(thread["thread_id"])


async def test_if_exists_and_if_not_exists(ana: LangGraphClient) -> None:
    thread = await ana.threads.create(thread_id="fixed-id")
    assert (await ana.threads.create(thread_id="fixed-id", if_exists="do_nothing"))["thread_id"] == thread[
        "thread_id"
    ]
    with pytest.raises(ConflictError):
        await ana.threads.create(thread_id="fixed-id")
    with pytest.raises(NotFoundError):
        await ana.runs.create("no-such-thread", "lead_agent", input=HI)
    run = await ana.runs.create("made-on-demand", "lead_agent", input=HI, if_not_exists="create")
    assert run["thread_id"] == "made-on-demand"


async def test_one_users_threads_and_runs_are_invisible_to_another(
    client_for: Callable[[str], LangGraphClient], fake_model: FakeOpenAI
) -> None:
    ana, bob = client_for("tok-ana"), client_for("tok-bob")
    thread = await ana.threads.create()
    run = await ana.runs.create(thread["thread_id"], "lead_agent", input=HI)
    for attempt in (
        bob.threads.get(thread["thread_id"]),
        bob.threads.get_state(thread["thread_id"]),
        bob.runs.get(thread["thread_id"], run["run_id"]),
        bob.runs.create(thread["thread_id"], "lead_agent", input=HI),
    ):
        with pytest.raises(NotFoundError):
            await attempt
    assert await bob.threads.search() == []
    await ana.runs.join(thread["thread_id"], run["run_id"])


async def test_a_thread_whose_record_cannot_be_read_is_still_shown_and_runs(
    ana: LangGraphClient, fake_model: FakeOpenAI, bus: Bus
) -> None:
    """Its record has a status only a newer Antler knows: the API shows the thread as far as its record
    can be read (before: a 500 on every request for it, runs included), a run on it answers, and the
    runner writes the record back readable."""
    fake_model.script(Reply(text="Still here."))
    thread = await ana.threads.create(metadata={"topic": "cats"})
    thread_id = thread["thread_id"]
    kv = await bus.kv(bus.subjects.threads_bucket)
    stored = json.loads((await kv.get(thread_id)).value or b"{}")
    await kv.put(thread_id, json.dumps({**stored, "status": "paused"}).encode())

    assert (await ana.threads.get(thread_id))["metadata"] == {"topic": "cats"}
    result = await ana.runs.wait(thread_id, "lead_agent", input=HI)
    assert result["messages"][-1]["content"] == "Still here."
    mended = decode(ThreadRecord, (await kv.get(thread_id)).value or b"")
    assert (mended.metadata, mended.status) == ({"topic": "cats"}, "idle")
    assert [t["thread_id"] for t in await ana.threads.search(metadata={"topic": "cats"})] == [thread_id]


async def test_a_cut_stream_resumed_with_last_event_id_yields_every_event_once(
    api_url: str, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text=" ".join(f"w{i}" for i in range(12)), chunk_delay=0.05))
    headers = {"x-api-key": "tok-ana"}
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers=headers, timeout=30) as http:
        thread = (await http.post("/threads", json={})).json()
        body = {"assistant_id": "lead_agent", "input": HI, "stream_mode": ["messages-tuple"]}
        first: list[tuple[str | None, str, Any]] = []
        async with http.stream("POST", f"/threads/{thread['thread_id']}/runs/stream", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            location = response.headers["location"]
            assert response.headers["content-location"].endswith("/runs/" + location.split("/")[-2])
            async for sent in sse_frames(response):
                first.append(sent)
                if len(first) == 4:
                    break  # the connection drops here
        async with http.stream("GET", location, headers={"Last-Event-ID": first[-1][0] or ""}) as response:
            rest = [sent async for sent in sse_frames(response)]
    ids = [id_order(i) for i, _, _ in first + rest if i is not None]
    assert ids == sorted(set(ids)), "in order, nothing twice"
    assert streamed_answer(first + rest) == " ".join(f"w{i}" for i in range(12)), "nothing missed"
    assert rest[-1][1] == "end"


async def test_bad_inputs_get_clear_4xx_answers(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=f"{api_url}/api", timeout=10) as http:
        unauthorized = await http.get("/threads/x")
        assert unauthorized.status_code == 401
        assert "token" in unauthorized.json()["detail"]
        http.headers["Authorization"] = "Bearer tok-ana"
        missing = await http.get("/threads/does-not-exist")
        assert missing.status_code == 404
        assert missing.json() == {"detail": "thread does-not-exist not found"}
        broken = await http.post("/threads", content=b"{oops", headers={"content-type": "application/json"})
        assert broken.status_code == 422
        assert "JSON" in broken.json()["detail"]
        wrong = await http.post("/threads/search", json={"limit": "many"})
        assert wrong.status_code == 422
        assert "limit" in wrong.json()["detail"]


async def test_the_api_is_also_mounted_where_deerflows_frontend_looks(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=api_url, headers={"x-api-key": "tok-ana"}, timeout=10) as http:
        response = await http.post("/api/langgraph/assistants/search", json={})
        assert response.status_code == 200
        assert response.json()[0]["assistant_id"] == "lead_agent"
        assert (await http.get("/health")).json()["nats"] is True
        spec = json.loads((await http.get("/openapi.json")).text)
        assert "/api/threads" in spec["paths"]


async def test_disconnecting_with_on_disconnect_cancel_cancels_the_run(
    ana: LangGraphClient, fake_model: FakeOpenAI, api_url: str
) -> None:
    fake_model.script(Reply(text="x " * 200, chunk_delay=0.1))
    thread = await ana.threads.create()
    stream = ana.runs.stream(
        thread["thread_id"], "lead_agent", input=HI, stream_mode="messages-tuple", on_disconnect="cancel"
    )
    run_id = None
    async for part in stream:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "messages":
            break
    await stream.aclose()
    assert run_id is not None
    for _ in range(100):
        status = (await ana.runs.get(thread["thread_id"], run_id))["status"]
        if status != "running":
            break
        await asyncio.sleep(0.1)
    assert status == "interrupted"


async def test_taking_another_users_thread_id_is_answered_like_an_unusable_id(api_url: str) -> None:
    """Nothing tells ana that bob has a thread `bobs-diary`: she gets what any id she cannot use gets."""
    async with (
        httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}) as ana,
        httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob,
    ):
        assert (await bob.post("/threads", json={"thread_id": "bobs-diary", "metadata": {"x": 1}})).is_success

        def shape(response: httpx.Response, thread_id: str) -> tuple[int, str]:
            return response.status_code, response.json()["detail"].replace(repr(thread_id), "<id>")

        unusable = shape(await ana.post("/threads", json={"thread_id": "no.dots"}), "no.dots")
        assert unusable[0] == 422
        for attempt in (
            ana.post("/threads", json={"thread_id": "bobs-diary"}),
            ana.post("/threads", json={"thread_id": "bobs-diary", "if_exists": "do_nothing"}),
            ana.post("/threads/bobs-diary/runs", json={"input": HI, "if_not_exists": "create"}),
        ):
            assert shape(await attempt, "bobs-diary") == unusable
        missing = await ana.post("/threads/bobs-diary/runs", json={"input": HI})
        assert (missing.status_code, missing.json()) == (404, {"detail": "thread bobs-diary not found"})

        mine = await ana.post("/threads", json={"thread_id": "anas-diary"})
        again = await ana.post("/threads", json={"thread_id": "anas-diary"})
        assert (mine.status_code, again.status_code) == (200, 409), "her own thread is a plain conflict"
        bobs = (await bob.get("/threads/bobs-diary")).json()
        assert bobs["metadata"] == {"x": 1}
        assert (await bob.get("/threads/bobs-diary/runs")).json() == []


async def test_runs_a_runner_could_not_start_are_refused_up_front(api_url: str) -> None:
    """A runner fails on these before the run starts: the run would never end, /wait would hang."""
    refused = {
        "command-key": ({"command": {"resum": 1}}, "command.resum"),
        "recursion-limit": ({"input": HI, "config": {"recursion_limit": "deep"}}, "config.recursion_limit"),
        "run-timeout": (
            {"input": HI, "config": {"configurable": {"run_timeout_seconds": "long"}}},
            "config.configurable.run_timeout_seconds",
        ),
        "stream-mode": ({"input": HI, "stream_mode": "everything"}, "stream_mode"),
    }
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        for case, (body, field) in refused.items():
            response = await http.post(f"/threads/{thread}/runs/wait", json=body)
            assert response.status_code == 422, case
            assert response.json()["detail"].startswith(field), (case, response.json())
        assert (await http.get(f"/threads/{thread}/runs")).json() == [], "nothing was submitted"


async def test_history_filters_and_suggestion_models_that_cannot_work_are_422s(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        history = await http.post(f"/threads/{thread}/history", json={"metadata": {"a'b": 1}})
        assert history.status_code == 422
        assert history.json()["detail"].startswith("metadata.a'b")
        suggested = await http.post(f"/threads/{thread}/suggestions", json={"model_name": "nope"})
        assert (suggested.status_code, suggested.json()) == (
            422,
            {"detail": "model_name: no model named 'nope' (configured: fake)"},
        )


async def test_the_sdk_streams_subagent_task_events_in_custom_mode(
    ana: LangGraphClient, fake_model: FakeOpenAI, nats_url: str, stack_config: Any
) -> None:
    from tests.support.subagents import running_executor, task_call

    fake_model.script(
        Reply(tool_calls=[task_call("call_s", "List the uploads")]),
        Reply(text="no uploads yet", when="List the uploads"),
        Reply(text="There are no uploads yet.", when="no uploads yet"),
    )
    async with running_executor(nats_url, stack_config):
        thread = await ana.threads.create()
        parts = [
            part
            async for part in ana.runs.stream(
                thread["thread_id"],
                "lead_agent",
                input={"messages": [{"role": "user", "content": "What did I upload?"}]},
                stream_mode=["custom", "values"],
                context={"subagent_enabled": True},
            )
        ]
    custom = [p.data for p in parts if p.event == "custom"]
    assert [c["type"] for c in custom] == ["task_started", "task_running", "task_completed"]
    assert {c["task_id"] for c in custom} == {"call_s"}
    assert custom[-1]["result"] == "no uploads yet"
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][-1]["content"] == "There are no uploads yet."
