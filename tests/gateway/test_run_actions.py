"""The actions under an answer and a message, against the whole stack over HTTP, in DeerFlow's
shapes: regenerate, edit and resend, branch, thumbs up or down; another user's thread refused."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = pytest.mark.asyncio


def said(text: str) -> dict[str, Any]:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}}


async def thread_asked(http: httpx.AsyncClient, *questions: str) -> str:
    """A new thread in which each question was asked and answered, one run after the other."""
    thread = str((await http.post("/threads", json={})).json()["thread_id"])
    for question in questions:
        await http.post(f"/threads/{thread}/runs/wait", json=said(question))
    return thread


async def stream(http: httpx.AsyncClient, thread: str, body: dict[str, Any]) -> str:
    """Stream a run as DeerFlow's UI does after `prepare` (`runs/stream` with the checkpoint); its run id."""
    run_id = ""
    async with http.stream("POST", f"/threads/{thread}/runs/stream", json=body) as answer:
        assert answer.status_code == 200, await answer.aread()
        async for line in answer.aiter_lines():
            if line.startswith("data:") and not run_id and '"run_id"' in line:
                run_id = line.split('"run_id": "', 1)[-1].split('"', 1)[0].split('"run_id":"')[-1]
    return run_id


async def messages_of(http: httpx.AsyncClient, thread: str) -> list[dict[str, Any]]:
    return (await http.get(f"/threads/{thread}/messages")).json()["data"]  # type: ignore[no-any-return]


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        out.append(f"{m['type']}:{content}")
    return out


async def test_regenerate_and_edit_answer_again_and_keep_the_old_answers_in_history(
    http: httpx.AsyncClient, bob: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="Paris", when="capital"), Reply(text="Berlin, first try", when="Germany"))
    thread = await thread_asked(http, "capital of France?", "and of Germany?")
    before = await messages_of(http, thread)
    first_answer, old_answer = before[1], before[3]

    # Only the latest answer, and only by its owner.
    older = await http.post(
        f"/threads/{thread}/runs/regenerate/prepare", json={"message_id": first_answer["id"]}
    )
    assert older.status_code == 409
    assert "latest" in older.json()["detail"]
    refused = await bob.post(
        f"/threads/{thread}/runs/regenerate/prepare", json={"message_id": old_answer["id"]}
    )
    assert refused.status_code == 404
    assert (await http.post(f"/threads/{thread}/runs/regenerate/prepare", json={})).status_code == 422

    prepared = await http.post(
        f"/threads/{thread}/runs/regenerate/prepare", json={"message_id": old_answer["id"]}
    )
    assert prepared.status_code == 200, prepared.text
    plan = prepared.json()
    assert set(plan) == {"input", "checkpoint", "metadata", "target_run_id"}
    assert plan["input"]["messages"][0]["id"] == before[2]["id"]
    assert plan["input"]["messages"][0]["content"] == [{"type": "text", "text": "and of Germany?"}]
    assert plan["metadata"]["regenerate_from_message_id"] == old_answer["id"]
    assert plan["metadata"]["regenerate_checkpoint_id"] == plan["checkpoint"]["checkpoint_id"]
    runs = (await http.get(f"/threads/{thread}/runs")).json()
    assert plan["target_run_id"] == runs[0]["run_id"]  # the newest run wrote the old answer

    fake_model.script(Reply(text="Berlin, second try", when="Germany"))
    body = {**plan, "assistant_id": "lead_agent", "stream_mode": ["values"]}
    await stream(http, thread, body)
    after = await messages_of(http, thread)
    assert texts(after) == [
        "human:capital of France?",
        "ai:Paris",
        "human:and of Germany?",
        "ai:Berlin, second try",
    ]
    newest = (await http.get(f"/threads/{thread}/runs")).json()[0]
    assert newest["metadata"]["regenerate_from_run_id"] == plan["target_run_id"]
    page = (await http.get(f"/threads/{thread}/messages/page")).json()["data"]
    assert page[3]["run_id"] == newest["run_id"]  # the new answer is the new run's
    # The new run's own history holds its turn only: the user's message and the new answer.
    own = (await http.get(f"/threads/{thread}/runs/{newest['run_id']}/messages")).json()["data"]
    assert texts([row["content"] for row in own]) == ["human:and of Germany?", "ai:Berlin, second try"]
    kept = (await http.get(f"/threads/{thread}/runs/{plan['target_run_id']}/messages")).json()["data"]
    assert texts([row["content"] for row in kept]) == ["human:and of Germany?", "ai:Berlin, first try"]
    # The old answer is a sibling in the thread's history, not gone.
    history = (await http.post(f"/threads/{thread}/history", json={"limit": 100})).json()
    answers = {m["content"] for s in history for m in s["values"].get("messages", []) if m["type"] == "ai"}
    assert {"Berlin, first try", "Berlin, second try"} <= answers


async def test_edit_and_resend_replaces_the_latest_message_and_not_while_answering(
    http: httpx.AsyncClient, bob: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="Berlin", when="Germany"))
    thread = await thread_asked(http, "capital of Germany?")
    after = await messages_of(http, thread)
    human = after[0]
    unchanged = await http.post(
        f"/threads/{thread}/runs/edit-regenerate/prepare",
        json={"human_message_id": human["id"], "replacement_text": "capital of Germany?"},
    )
    assert unchanged.status_code == 409
    not_human = await http.post(
        f"/threads/{thread}/runs/edit-regenerate/prepare",
        json={"human_message_id": after[1]["id"], "replacement_text": "of Spain?"},
    )
    assert not_human.status_code == 409
    edit = await http.post(
        f"/threads/{thread}/runs/edit-regenerate/prepare",
        json={"human_message_id": human["id"], "replacement_text": "capital of Italy?"},
    )
    assert edit.status_code == 200, edit.text
    plan = edit.json()
    assert plan["source_message_ids"] == [human["id"], after[1]["id"]]
    assert plan["input"]["messages"][0]["id"] == plan["replacement_human_message_id"]
    assert plan["metadata"]["replay_kind"] == "edit"
    assert plan["metadata"]["edit_from_message_id"] == human["id"]
    refused = await bob.post(
        f"/threads/{thread}/runs/edit-regenerate/prepare",
        json={"human_message_id": human["id"], "replacement_text": "x"},
    )
    assert refused.status_code == 404
    fake_model.script(Reply(text="Rome", when="Italy"))
    await stream(http, thread, {**plan, "assistant_id": "lead_agent"})
    edited = await messages_of(http, thread)
    assert texts(edited) == ["human:capital of Italy?", "ai:Rome"]
    assert edited[0]["id"] == plan["replacement_human_message_id"]
    history = (await http.post(f"/threads/{thread}/history", json={"limit": 100})).json()
    asked = {text for s in history for text in texts(s["values"].get("messages", []))}
    assert "human:capital of Germany?" in asked  # the original turn is still in the history

    # Not while the thread is answering.
    hold = asyncio.Event()
    fake_model.script(Reply(text="Madrid.", when="Spain", hold=hold))
    asked_before = len(fake_model.agent_requests)
    started = await http.post(f"/threads/{thread}/runs", json=said("and of Spain?"))
    try:
        await fake_model.wait_for_requests(asked_before + 1, timeout=60)
        busy = await http.post(
            f"/threads/{thread}/runs/edit-regenerate/prepare",
            json={"human_message_id": edited[0]["id"], "replacement_text": "of France?"},
        )
        assert busy.status_code == 409
        assert "answering" in busy.json()["detail"]
    finally:
        hold.set()
    await http.get(f"/threads/{thread}/runs/{started.json()['run_id']}/join")


async def test_a_branch_holds_the_history_up_to_the_answer_and_names_its_origin(
    http: httpx.AsyncClient, bob: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="one", when="first"), Reply(text="two", when="second"))
    thread = await thread_asked(http, "first question", "second question")
    source = await messages_of(http, thread)

    assert (
        await bob.post(f"/threads/{thread}/branches", json={"message_id": source[1]["id"]})
    ).status_code == 404
    missing = await http.post(f"/threads/{thread}/branches", json={"message_id": "nope"})
    assert missing.status_code == 404
    answered = await http.post(f"/threads/{thread}/branches", json={"message_id": source[1]["id"]})
    assert answered.status_code == 200, answered.text
    branch = answered.json()
    assert branch["parent_thread_id"] == thread
    assert branch["branched_from_message_id"] == source[1]["id"]
    assert branch["parent_checkpoint_id"]
    new = branch["thread_id"]
    assert texts(await messages_of(http, new)) == ["human:first question", "ai:one"]
    assert texts(await messages_of(http, thread)) == texts(source)  # the source is untouched

    # Listed with its origin, for its owner only.
    record = (await http.get(f"/threads/{new}")).json()
    assert record["metadata"]["branch_parent_thread_id"] == thread
    assert record["metadata"]["deerflow_branch"] is True
    found = (
        await http.post("/threads/search", json={"metadata": {"branch_parent_thread_id": thread}})
    ).json()
    assert [t["thread_id"] for t in found] == [new]
    assert (await bob.get(f"/threads/{new}")).status_code == 404

    # The branch goes on by itself.
    fake_model.script(Reply(text="three", when="third"))
    await http.post(f"/threads/{new}/runs/wait", json=said("third question"))
    assert texts(await messages_of(http, new))[-2:] == ["human:third question", "ai:three"]
    assert len(await messages_of(http, thread)) == 4


async def test_feedback_is_kept_on_the_run_counted_in_usage_and_can_be_taken_back(
    http: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    thread = await thread_asked(http, "rate me")
    run_id = (await http.get(f"/threads/{thread}/runs")).json()[0]["run_id"]
    url = f"/threads/{thread}/runs/{run_id}/feedback"

    assert (await bob.put(url, json={"rating": 1})).status_code == 404
    assert (await http.put(url, json={"rating": 5})).status_code == 422
    given = await http.put(url, json={"rating": 1, "comment": "spot on"})
    assert given.status_code == 200, given.text
    feedback = given.json()
    assert feedback["rating"] == 1
    assert feedback["comment"] == "spot on"
    assert feedback["run_id"] == run_id
    assert feedback["thread_id"] == thread
    assert feedback["user_id"] == "ana"

    again = (await http.put(url, json={"rating": -1})).json()  # a change of mind replaces it
    assert again["feedback_id"] == feedback["feedback_id"]
    assert again["rating"] == -1
    run = (await http.get(f"/threads/{thread}/runs/{run_id}")).json()
    assert run["feedback"]["rating"] == -1
    assert (await http.get(f"/threads/{thread}/runs")).json()[0]["feedback"]["rating"] == -1
    page = (await http.get(f"/threads/{thread}/messages/page")).json()["data"]
    assert page[-1]["feedback"]["rating"] == -1  # on the run's answer, where DeerFlow's UI looks
    assert page[0]["feedback"] is None
    usage = (await http.get(f"/threads/{thread}/token-usage")).json()
    assert usage["feedback"] == {"total": 1, "positive": 0, "negative": 1}

    assert (await bob.delete(url)).status_code == 404
    assert (await http.delete(url)).json() == {"success": True}
    assert (await http.delete(url)).status_code == 404
    assert (await http.get(f"/threads/{thread}/runs/{run_id}")).json()["feedback"] is None
    assert (await http.get(f"/threads/{thread}/token-usage")).json()["feedback"]["total"] == 0


async def test_a_long_thread_branches_from_an_early_answer(http: httpx.AsyncClient) -> None:
    thread = await thread_asked(http, *(f"turn {turn}" for turn in range(7)))  # more than a page of history
    first_answer = (await messages_of(http, thread))[1]
    answered = await http.post(f"/threads/{thread}/branches", json={"message_id": first_answer["id"]})
    assert answered.status_code == 200, answered.text
    branch = answered.json()["thread_id"]
    assert texts(await messages_of(http, branch)) == ["human:turn 0", "ai:You said: turn 0"]
