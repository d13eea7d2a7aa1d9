"""Goal mode over HTTP, in DeerFlow's shapes: `GET/PUT/DELETE /api/threads/{id}/goal`, and the runs a
goal starts by itself listed with the thread's runs (real stack, scripted model)."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.fakes.openai_server import FakeOpenAI, Reply


async def test_a_goal_is_set_shown_and_cleared_in_deerflows_shapes(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    assert (await http.get(f"/threads/{thread}/goal")).json() == {"goal": None}

    put = await http.put(f"/threads/{thread}/goal", json={"objective": "  Ship the   release notes "})
    assert put.status_code == 200, put.text
    goal = put.json()["goal"]
    assert goal["objective"] == "Ship the release notes"
    assert goal["status"] == "active"
    assert (goal["continuation_count"], goal["max_continuations"]) == (0, 8)
    assert (goal["no_progress_count"], goal["max_no_progress_continuations"]) == (0, 2)
    assert goal["created_at"]
    assert goal["updated_at"]
    assert (await http.get(f"/threads/{thread}/goal")).json()["goal"] == goal
    # DeerFlow's UI shows the goal from the thread's state (`values.goal`), after a reload too.
    assert (await http.get(f"/threads/{thread}/state")).json()["values"]["goal"] == goal

    fewer = await http.put(f"/threads/{thread}/goal", json={"objective": "Other", "max_continuations": 3})
    assert fewer.json()["goal"]["max_continuations"] == 3

    cleared = await http.delete(f"/threads/{thread}/goal")
    assert cleared.status_code == 200
    assert cleared.json() == {"goal": None}
    assert (await http.get(f"/threads/{thread}/goal")).json() == {"goal": None}
    assert "goal" not in (await http.get(f"/threads/{thread}/state")).json()["values"]
    assert (await http.delete(f"/threads/{thread}/goal")).json() == {"goal": None}  # clearing twice is fine


async def test_a_goal_for_a_new_chats_id_creates_its_thread(http: httpx.AsyncClient) -> None:
    thread = str(uuid.uuid4())  # DeerFlow's UI holds a new chat's id before its first run
    put = await http.put(f"/threads/{thread}/goal", json={"objective": "Plan the move"})
    assert put.status_code == 200, put.text
    assert (await http.get(f"/threads/{thread}")).status_code == 200
    assert (await http.get(f"/threads/{thread}/goal")).json()["goal"]["objective"] == "Plan the move"


async def test_bad_goals_are_refused_with_a_message(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    for body in ({"objective": ""}, {"objective": "   "}, {"objective": "x" * 4001}, {}):
        response = await http.put(f"/threads/{thread}/goal", json=body)
        assert response.status_code == 422, body
        assert response.json()["detail"]
    too_many = await http.put(f"/threads/{thread}/goal", json={"objective": "x", "max_continuations": 9})
    assert too_many.status_code == 422
    assert "max_continuations" in str(too_many.json()["detail"])
    assert (await http.get(f"/threads/{thread}/goal")).json() == {"goal": None}


async def test_another_users_thread_goal_is_refused_and_left_alone(
    http: httpx.AsyncClient, api_url: str
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    await http.put(f"/threads/{thread}/goal", json={"objective": "Ana's goal"})
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        assert (await bob.get(f"/threads/{thread}/goal")).status_code == 404
        assert (await bob.put(f"/threads/{thread}/goal", json={"objective": "Bob's"})).status_code == 404
        assert (await bob.delete(f"/threads/{thread}/goal")).status_code == 404
    assert (await http.get(f"/threads/{thread}/goal")).json()["goal"]["objective"] == "Ana's goal"


async def end_of_stream(response: httpx.Response) -> dict:
    event = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event == "end":
            return json.loads(line[len("data: ") :])
    raise AssertionError("the stream ended without `end`")


async def test_a_goals_continuation_is_a_run_of_the_thread_listed_with_its_runs(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    await http.put(f"/threads/{thread}/goal", json={"objective": "A haiku and its title"})
    fake_model.script(Reply(text="An old silent pond"), Reply(text="Title: Pond", when="Next step: title"))
    fake_model.verdicts(
        {"verdict": "continue", "reason": "no title", "next_step": "title it"}, {"verdict": "done"}
    )
    body = {"input": {"messages": [{"role": "user", "content": "A haiku"}]}, "stream_mode": ["values"]}

    async with http.stream("POST", f"/threads/{thread}/runs/stream", json=body) as response:
        first = await end_of_stream(response)
    assert first["status"] == "success"
    assert first["goal"]["verdict"] == "continue"
    assert first["goal"]["continuation"] == 1
    next_run = first["goal"]["next_run_id"]
    async with http.stream("GET", f"/threads/{thread}/runs/{next_run}/stream") as response:
        second = await end_of_stream(response)
    assert second["goal"]["verdict"] == "done"
    assert second["goal"]["next_run_id"] is None

    runs = (await http.get(f"/threads/{thread}/runs")).json()
    assert len(runs) == 2
    assert next_run in {run["run_id"] for run in runs}
    assert all(run["status"] == "success" for run in runs)
    assert (await http.get(f"/threads/{thread}/goal")).json() == {"goal": None}  # reached: cleared
    state = (await http.get(f"/threads/{thread}/state")).json()
    hidden = [m for m in state["values"]["messages"] if m.get("additional_kwargs", {}).get("hide_from_ui")]
    assert len(hidden) == 1  # the continuation's prompt, hidden from the UI as in DeerFlow
    assert state["values"]["messages"][-1]["content"] == "Title: Pond"
