"""The LangGraph SDK's methods beyond threads and runs, driven by the unmodified langgraph_sdk client:
an assistant's graph and schemas (described by a runner, from the graph its runs get), a run's
feedback by run id, the small methods Antler serves, and a clear 501 for what it does not offer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import InternalServerError, NotFoundError, UnprocessableEntityError

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway import running_gateway

pytestmark = pytest.mark.asyncio

HI = {"messages": [{"role": "user", "content": "Hello there"}]}


async def test_get_graph_draws_the_graph_the_runs_get(ana: LangGraphClient) -> None:
    drawn = await ana.assistants.get_graph("lead_agent")
    ids = [node["id"] for node in drawn["nodes"]]
    assert ids[0] == "__start__"
    assert ids[-1] == "__end__"
    assert {"model", "tools"} <= set(ids)
    # The agent's middleware hooks are nodes of the graph a run compiles (the runner's), not of a
    # bare model-and-tools loop.
    assert any("." in node_id for node_id in ids), ids
    assert all("id" not in node.get("data", {}) for node in drawn["nodes"]), "no Python import paths"
    edges = {(edge["source"], edge["target"]) for edge in drawn["edges"]}
    assert all(source in ids and target in ids for source, target in edges)
    assert any(target == "__end__" for _, target in edges)
    tools = next(node for node in drawn["nodes"] if node["id"] == "tools")
    assert "ask_clarification" in tools["metadata"]["__tools"]
    assert (await ana.assistants.get_graph("lead_agent", xray=True))["nodes"]


async def test_get_schemas_describes_input_state_and_context(ana: LangGraphClient) -> None:
    found = await ana.assistants.get_schemas("lead_agent")
    assert found["graph_id"] == "lead_agent"
    assert "messages" in found["input_schema"]["properties"]
    assert {"messages", "title", "todos", "artifacts"} <= set(found["state_schema"]["properties"])
    assert "messages" in found["output_schema"]["properties"]
    assert {"thread_id", "agent_name", "model_name"} <= set(found["context_schema"]["properties"])
    assert "__pregel_resuming" not in found["config_schema"].get("properties", {})
    assert await ana.assistants.get_subgraphs("lead_agent") == {}


async def test_graph_and_schemas_of_the_lead_agents_uuid_and_of_a_custom_agent(
    ana: LangGraphClient, client_for: Callable[[str], LangGraphClient], http: httpx.AsyncClient
) -> None:
    uuid_id = (await ana.assistants.search())[0]["assistant_id"]
    assert (await ana.assistants.get_schemas(uuid_id))["graph_id"] == "lead_agent"
    from bus.messages import ASSISTANT_IDS

    assert (await ana.assistants.get_graph(ASSISTANT_IDS[1]))["nodes"]
    made = await http.post("/agents", json={"name": "quill", "description": "Edits copy", "soul": "Terse."})
    assert made.status_code == 201, made.text
    schemas = await ana.assistants.get_schemas("quill")
    assert "messages" in schemas["state_schema"]["properties"]
    assert {"model", "tools"} <= {node["id"] for node in (await ana.assistants.get_graph("quill"))["nodes"]}
    bob = client_for("tok-bob")
    for attempt in (bob.assistants.get_graph("quill"), ana.assistants.get_schemas("nobody")):
        with pytest.raises(NotFoundError) as refused:
            await attempt
        assert "not found" in refused.value.response.json()["detail"]


async def test_an_xray_that_is_no_depth_is_a_422(ana: LangGraphClient) -> None:
    with pytest.raises(UnprocessableEntityError) as refused:
        await ana.http.get("/assistants/lead_agent/graph", params={"xray": "deep"})
    assert refused.value.response.json()["detail"].startswith("xray:")


async def test_a_runs_feedback_is_found_by_the_run_alone(
    ana: LangGraphClient, client_for: Callable[[str], LangGraphClient], fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="Rated."))
    thread = await ana.threads.create()
    await ana.runs.wait(thread["thread_id"], "lead_agent", input=HI)
    run_id = (await ana.runs.list(thread["thread_id"]))[0]["run_id"]
    assert await ana.http.get(f"/runs/{run_id}/feedback") == []
    given = await ana.http.put(
        f"/threads/{thread['thread_id']}/runs/{run_id}/feedback", json={"rating": -1, "comment": "too short"}
    )
    found = await ana.http.get(f"/runs/{run_id}/feedback")
    assert [(f["feedback_id"], f["rating"], f["comment"]) for f in found] == [
        (given["feedback_id"], -1, "too short")
    ]
    assert found[0]["thread_id"] == thread["thread_id"]
    with pytest.raises(NotFoundError):
        await client_for("tok-bob").http.get(f"/runs/{run_id}/feedback")


async def test_the_small_methods_antler_serves(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="one"), Reply(text="two"))
    assert await ana.assistants.count() == 1
    assert await ana.assistants.count(graph_id="another") == 0
    versions = await ana.assistants.get_versions("lead_agent")
    assert [(v["assistant_id"], v["version"]) for v in versions] == [("lead_agent", 1)]
    assert (await ana.assistants.set_latest("lead_agent", 1))["version"] == 1
    with pytest.raises(NotFoundError):
        await ana.assistants.set_latest("lead_agent", 2)

    run = await ana.runs.create(None, "lead_agent", input=HI)  # stateless: a thread of its own
    result = await ana.runs.join(run["thread_id"], run["run_id"])
    assert result["messages"][-1]["content"] == "one"
    state = await ana.threads.get_state(run["thread_id"])
    at = await ana.threads.get_state(run["thread_id"], checkpoint=state["checkpoint"])
    assert at["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert at["values"]["messages"][-1]["content"] == "one"

    await ana.threads.create(metadata={"project": "x"})
    assert await ana.threads.count() == 2
    assert await ana.threads.count(metadata={"project": "x"}) == 1
    assert await ana.threads.count(status="busy") == 0


async def test_cancel_many_stops_the_named_runs(ana: LangGraphClient, fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="never", delay=30))
    thread = await ana.threads.create()
    run = await ana.runs.create(thread["thread_id"], "lead_agent", input=HI)
    await fake_model.wait_for_requests(1)
    await ana.runs.cancel_many(thread_id=thread["thread_id"], run_ids=[run["run_id"]])
    joined = await ana.runs.join(thread["thread_id"], run["run_id"])  # returns once the run has ended
    assert "never" not in str(joined)
    assert (await ana.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    with pytest.raises(UnprocessableEntityError):
        await ana.runs.cancel_many(status="all")


def _unsupported(client: LangGraphClient, thread_id: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "crons.create": lambda: client.crons.create("lead_agent", schedule="0 8 * * *"),
        "crons.create_for_thread": lambda: client.crons.create_for_thread(
            thread_id, "lead_agent", schedule="0 8 * * *"
        ),
        "crons.search": lambda: client.crons.search(),
        "crons.delete": lambda: client.crons.delete("c1"),
        "store.put_item": lambda: client.store.put_item(["notes"], "k", {"v": 1}),
        "store.get_item": lambda: client.store.get_item(["notes"], "k"),
        "store.search_items": lambda: client.store.search_items(["notes"]),
        "assistants.create": lambda: client.assistants.create("lead_agent"),
        "assistants.update": lambda: client.assistants.update("lead_agent", name="renamed"),
        "threads.copy": lambda: client.threads.copy(thread_id),
        "threads.prune": lambda: client.threads.prune([thread_id]),
        "runs.create_batch": lambda: client.runs.create_batch([{"assistant_id": "lead_agent", "input": HI}]),
    }


INSTEAD = {
    "crons": "/api/scheduled-tasks",
    "store": "/api/memory",
    "assistants": "/api/agents",
    "threads.copy": "/branches",
    "threads.prune": "DELETE /api/threads/",
    "runs.create_batch": "runs.create",
}


async def test_methods_antler_does_not_offer_are_a_501_saying_what_to_use_instead(
    ana: LangGraphClient,
) -> None:
    thread = await ana.threads.create()
    for method, call in _unsupported(ana, thread["thread_id"]).items():
        with pytest.raises(InternalServerError) as refused:
            await call()
        response = refused.value.response
        assert response.status_code == 501, method
        detail = response.json()["detail"]
        assert detail.startswith(f"{method} is not offered"), detail
        instead = INSTEAD.get(method) or INSTEAD[method.split(".")[0]]
        assert instead in detail, (method, detail)
        assert "docs/http-api.md#" in detail
    stream = await ana.threads.join_stream(thread["thread_id"])
    with pytest.raises(InternalServerError) as refused:
        _ = [part async for part in stream]
    assert "runs.join_stream" in refused.value.response.json()["detail"]


async def test_with_no_runner_up_the_graph_is_a_503_naming_what_is_missing(
    nats_url: str, stack_config: AppConfig
) -> None:
    async with running_gateway(nats_url, stack_config) as base:
        client = get_client(url=f"{base}/api", api_key="tok-ana")
        try:
            asked = (client.assistants.get_graph("lead_agent"), client.assistants.get_schemas("lead_agent"))
            for attempt in asked:
                with pytest.raises(InternalServerError) as refused:
                    await attempt
                assert refused.value.response.status_code == 503
                assert "runner" in refused.value.response.json()["detail"]
        finally:
            await client.http.client.aclose()


async def test_a_custom_agent_is_an_assistant_whose_runs_have_its_soul(
    ana: LangGraphClient,
    client_for: Callable[[str], LangGraphClient],
    http: httpx.AsyncClient,
    fake_model: FakeOpenAI,
) -> None:
    soul = "You are Quill, a terse copy editor."
    made = await http.post("/agents", json={"name": "quill", "description": "Edits copy", "soul": soul})
    assert made.status_code == 201, made.text
    found = await ana.assistants.search()
    assert [(a["assistant_id"], a["graph_id"]) for a in found] == [
        ("lead_agent", "lead_agent"),
        ("quill", "lead_agent"),
    ]
    assert (await ana.assistants.get("quill"))["description"] == "Edits copy"
    assert await ana.assistants.count() == 2
    assert [a["assistant_id"] for a in await ana.assistants.search(name="qui")] == ["quill"]

    fake_model.script(Reply(text="Fixed."))
    thread = await ana.threads.create()
    result = await ana.runs.wait(thread["thread_id"], "quill", input=HI)
    assert result["messages"][-1]["content"] == "Fixed."
    prompt = fake_model.agent_requests[-1]["messages"][0]["content"]
    assert soul in str(prompt), "the run had the agent's soul"

    bob = client_for("tok-bob")
    assert [a["assistant_id"] for a in await bob.assistants.search()] == ["lead_agent"]
    with pytest.raises(NotFoundError):
        await bob.runs.create(None, "quill", input=HI)
