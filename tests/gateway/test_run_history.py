"""A run's history (messages, tool steps, subagent cards, files written) read back after its live
event log is gone: `GET .../runs/{run}/messages`, `.../events`, `.../workspace-changes`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from nats.js.errors import NotFoundError

from bus import Bus
from bus.run_events import events_streams
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.gateway import running_gateway
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.support.subagents import running_executor, task_call

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def api(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    """The stack with a subagent executor."""
    async with (
        running_runner(nats_url, stack_config),
        running_executor(nats_url, stack_config),
        running_broker(nats_url, stack_config),
        running_gateway(nats_url, stack_config) as base,
    ):
        yield f"{base}/api"


async def test_a_runs_steps_and_subagent_cards_outlive_its_live_event_log(
    api: str, bus: Bus, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[
                task_call("call_a", "Find fact A"),
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/notes.md", "content": "one\ntwo\n"}),
            ]
        ),
        Reply(text="A is 1", when="Find fact A"),
        Reply(text="Done: A is 1, notes written.", when="Wrote"),
    )
    async with (
        httpx.AsyncClient(base_url=api, headers={"x-api-key": "tok-ana"}, timeout=60) as ana,
        httpx.AsyncClient(base_url=api, headers={"x-api-key": "tok-bob"}, timeout=60) as bob,
    ):
        thread = (await ana.post("/threads", json={})).json()["thread_id"]
        body = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "Find A and take notes"}]},
            "context": {"subagent_enabled": True},
        }
        waited = await ana.post(f"/threads/{thread}/runs/wait", json=body)
        assert waited.status_code == 200, waited.text
        run_id = (await ana.get(f"/threads/{thread}/runs")).json()[0]["run_id"]

        # The live log is gone (as after `bus.run_events_max_age_hours`).
        (stream,) = await events_streams(bus, run_id)
        await bus.js.purge_stream(stream, subject=bus.subjects.run_events(run_id))
        with pytest.raises(NotFoundError):
            await bus.js.get_last_msg(stream, bus.subjects.run_events(run_id))

        base = f"/threads/{thread}/runs/{run_id}"
        events = (await ana.get(f"{base}/events")).json()
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert {
            "thread_id",
            "run_id",
            "seq",
            "event_type",
            "category",
            "content",
            "metadata",
            "created_at",
        } <= set(events[0])
        kinds = [e["event_type"] for e in events]
        assert kinds[0] == "run.start"
        assert kinds[-1] == "run.end"
        assert events[-1]["metadata"]["status"] == "success"
        # The answer that delegated, then the subagent's card with its steps, then the tools' results.
        delegated = kinds.index("llm.ai.response")
        assert kinds[delegated + 1 : delegated + 3] == ["subagent.start", "subagent.step"]
        assert "subagent.end" in kinds
        end = next(e for e in events if e["event_type"] == "subagent.end")
        assert end["content"]["task_id"] == "call_a"
        assert end["content"]["status"] == "completed"
        assert end["content"]["result"] == "A is 1"
        step = next(e for e in events if e["event_type"] == "subagent.step")
        assert step["metadata"]["task_id"] == "call_a"
        assert step["content"]["text"] == "A is 1"
        tool_calls = events[delegated]["content"]["tool_calls"]
        assert [c["name"] for c in tool_calls] == ["task", "write_file"]
        results = [e["content"]["name"] for e in events if e["event_type"] == "llm.tool.result"]
        assert sorted(results) == ["task", "write_file"]

        # One task's steps, as a task card pages them.
        card = (await ana.get(f"{base}/events", params={"task_id": "call_a"})).json()
        assert [e["event_type"] for e in card] == ["subagent.start", "subagent.step", "subagent.end"]
        later = (
            await ana.get(f"{base}/events", params={"task_id": "call_a", "after_seq": card[0]["seq"]})
        ).json()
        assert later == card[1:]
        only = (await ana.get(f"{base}/events", params={"event_types": "run.start,run.end"})).json()
        assert [e["event_type"] for e in only] == ["run.start", "run.end"]

        messages = (await ana.get(f"{base}/messages")).json()
        assert messages["has_more"] is False
        shown = [(m["event_type"], m["content"]["type"]) for m in messages["data"]]
        assert shown[0] == ("llm.human.input", "human")
        assert shown[-1] == ("llm.ai.response", "ai")
        assert messages["data"][-1]["content"]["content"] == "Done: A is 1, notes written."
        first_two = (await ana.get(f"{base}/messages", params={"after_seq": 1, "limit": 2})).json()
        assert first_two["has_more"] is True
        assert len(first_two["data"]) == 2

        changes = (await ana.get(f"{base}/workspace-changes")).json()
        assert changes["available"] is True
        assert changes["summary"]["created"] == 1
        assert changes["summary"]["additions"] == 2
        assert [(f["path"], f["status"]) for f in changes["files"]] == [
            ("/mnt/user-data/outputs/notes.md", "created")
        ]
        assert "+one" in changes["files"][0]["diff"]

        for path in ("events", "messages", "workspace-changes"):
            assert (await bob.get(f"{base}/{path}")).status_code == 404
        # Deleted with the thread.
        assert (await ana.delete(f"/threads/{thread}")).status_code == 204
        for path in ("events", "messages"):
            assert (await ana.get(f"{base}/{path}")).status_code == 404
        store = await bus.files()
        with contextlib.suppress(NotFoundError):
            leftovers = [i.name for i in await store.list(ignore_deletes=True) if thread in i.name]
            assert leftovers == []


async def test_a_run_that_wrote_no_files_shows_no_workspace_changes_but_its_messages(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, headers={"x-api-key": "tok-ana"}, timeout=60) as ana:
        thread = (await ana.post("/threads", json={})).json()["thread_id"]
        body: dict[str, Any] = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "hi"}]},
        }
        await ana.post(f"/threads/{thread}/runs/wait", json=body)
        run_id = (await ana.get(f"/threads/{thread}/runs")).json()[0]["run_id"]
        changes = (await ana.get(f"/threads/{thread}/runs/{run_id}/workspace-changes")).json()
        assert changes["available"] is False
        assert changes["files"] == []
        messages = (await ana.get(f"/threads/{thread}/runs/{run_id}/messages")).json()["data"]
        assert [m["content"]["type"] for m in messages] == ["human", "ai"]
