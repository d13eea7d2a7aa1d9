"""Compacting a thread by hand: `POST /api/threads/{id}/compact` in DeerFlow's shape, on a real stack."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = pytest.mark.asyncio

SUMMARY_PROMPT = "Context Extraction Assistant"
SUMMARY_HEAD = "Here is a summary of the conversation to date"


def said(text: str) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": text}]}}


async def test_compact_summarises_the_older_turns_and_the_thread_keeps_answering(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, api_url: str
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(
        Reply(text="Paris it is.", when="trip to Paris"),
        Reply(text="Three nights.", when="how long"),
    )
    await http.post(f"/threads/{thread}/runs/wait", json=said("Plan a trip to Paris in May"))
    await http.post(f"/threads/{thread}/runs/wait", json=said("And how long should I stay?"))

    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        refused = await bob.post(f"/threads/{thread}/compact", json={})
        assert refused.status_code == 404, "not bob's thread"

    fake_model.script(Reply(text="- A May trip to Paris is being planned.", when=SUMMARY_PROMPT))
    compacted = await http.post(f"/threads/{thread}/compact", json={"force": True})
    assert compacted.status_code == 200, compacted.text
    body = compacted.json()
    assert body["thread_id"] == thread
    assert body["compacted"] is True
    assert body["summary_updated"] is True
    assert (body["removed_message_count"], body["preserved_message_count"]) == (2, 2)
    assert body["checkpoint_id"]
    assert body["total_tokens"] > 0

    state = (await http.get(f"/threads/{thread}/state")).json()
    messages = state["values"]["messages"]
    assert messages[0]["content"].startswith(SUMMARY_HEAD)
    assert "A May trip to Paris" in messages[0]["content"]
    assert [m["content"] for m in messages[1:]] == ["And how long should I stay?", "Three nights."]

    fake_model.script(Reply(text="Book the Louvre early.", when="what to see"))
    await http.post(f"/threads/{thread}/runs/wait", json=said("And what to see?"))
    sent = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] != "system"]
    assert sent[0].startswith(SUMMARY_HEAD), "the next run starts from the summary"
    assert "Plan a trip to Paris in May" not in sent


async def test_a_thread_with_a_run_in_progress_is_not_compacted(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(Reply(text="Hi.", when="hello"))
    await http.post(f"/threads/{thread}/runs/wait", json=said("hello"))
    hold = asyncio.Event()
    fake_model.script(Reply(text="Done.", when="slow one", hold=hold))
    await http.post(f"/threads/{thread}/runs", json=said("a slow one"))
    await fake_model.wait_for_requests(2)
    busy = await http.post(f"/threads/{thread}/compact", json={})
    hold.set()
    assert busy.status_code == 409
    assert "run in progress" in busy.json()["detail"]


async def test_a_new_thread_has_nothing_to_compact(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    body = (await http.post(f"/threads/{thread}/compact")).json()
    assert body["compacted"] is False
    assert "nothing to compact" in body["reason"]
