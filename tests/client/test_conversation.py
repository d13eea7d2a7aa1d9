"""`antler.Client` and `antler.AsyncClient` against `antler up` on its defaults (the shared stack):
a chat, a streamed turn with a file and tool calls in DeerFlow's StreamEvent shapes, the blocking
client where an event loop already runs, and the errors a user gets for a mistake."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from antler import AsyncClient, Client
from antler.client import AntlerNotRunning, InvalidRequest, NotAllowed, NotFound, StreamEvent
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import Reply, ToolCall
from tests.support.shared_up import SHARED_UP, SharedUp

pytestmark = SHARED_UP


def marker() -> str:
    return f"CLIENT-{uuid.uuid4().hex[:8]}"


async def test_chat_returns_the_agents_answer_and_the_thread_goes_on(shared_up: SharedUp) -> None:
    async with AsyncClient(shared_up.config) as client:
        first = await client.chat("hello from python")
        thread_id = client.last_thread_id
        second = await client.chat("and again", thread_id)
        state = await client.get_thread(thread_id)

    assert first == "You said: hello from python"
    assert second == "You said: and again"
    said = [m["content"] for m in state["values"]["messages"] if m["type"] == "human"]
    assert said == ["hello from python", "and again"]


async def test_a_streamed_turn_sends_a_file_runs_tools_and_presents_an_artifact(
    shared_up: SharedUp, tmp_path: Path
) -> None:
    mark = marker()
    note = tmp_path / "note.txt"
    note.write_text(f"NOTE-{mark}: the herd is north", encoding="utf-8")
    report = f"/mnt/user-data/outputs/report-{mark}.txt"
    shared_up.model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/note.txt"})], when=mark),
        Reply(
            tool_calls=[ToolCall("write_file", {"path": report, "content": "north,12\n"})],
            when=f"NOTE-{mark}",
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [report]})], when=f"report-{mark}"),
    )

    async with AsyncClient(shared_up.config) as client:
        events = [e async for e in client.stream(f"read my note {mark}", files=[note])]
        thread_id = client.last_thread_id
        content, mime = await client.get_artifact(thread_id, report)

    assert all(isinstance(e, StreamEvent) for e in events)
    assert events[-1].type == "end"
    usage = events[-1].data["usage"]
    assert set(usage) == {"input_tokens", "output_tokens", "total_tokens"}
    assert usage["total_tokens"] > 0
    tuples = [e.data for e in events if e.type == "messages-tuple"]
    calls = [c["name"] for t in tuples if t["type"] == "ai" for c in t.get("tool_calls", [])]
    assert calls == ["read_file", "write_file", "present_files"]  # each call once
    results = {t["name"]: t for t in tuples if t["type"] == "tool"}
    assert f"NOTE-{mark}" in results["read_file"]["content"]
    assert results["read_file"]["tool_call_id"]
    # AI text comes as deltas: concatenated per id they make the answer, which no values event repeats
    texts: dict[str, str] = {}
    for t in tuples:
        if t["type"] == "ai" and t["content"]:
            texts[t["id"]] = texts.get(t["id"], "") + t["content"]
    assert list(texts.values())[-1].startswith("You said: read my note")
    values = [e.data for e in events if e.type == "values"]
    assert set(values[-1]) == {"title", "messages", "artifacts"}
    assert values[-1]["artifacts"] == [report]
    sent = next(m for m in values[-1]["messages"] if m["type"] == "human")
    assert sent["additional_kwargs"]["files"][0]["path"] == "/mnt/user-data/uploads/note.txt"
    assert (content, mime) == (b"north,12\n", "text/plain")


async def test_the_blocking_client_works_where_an_event_loop_is_already_running(shared_up: SharedUp) -> None:
    """As in a notebook: the caller's thread runs a loop, and the client's calls block inside it (the
    cell runs in a thread of its own here: the test's loop serves the scripted model meanwhile)."""
    found: dict[str, Any] = {}

    async def notebook_cell() -> None:
        with Client(shared_up.config) as client:
            found["answer"] = client.chat("from a notebook")
            found["types"] = [e.type for e in client.stream("streamed", client.last_thread_id)]

    await asyncio.to_thread(asyncio.run, notebook_cell())

    assert found["answer"] == "You said: from a notebook"
    assert found["types"][-1] == "end"
    assert "messages-tuple" in found["types"]
    assert "values" in found["types"]


async def test_no_running_antler_says_how_to_start_one(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("{}", encoding="utf-8")
    client = AsyncClient(tmp_path / "config.yaml")

    with pytest.raises(AntlerNotRunning, match="antler up"):
        await client.chat("anyone?")


async def test_bad_arguments_are_named(shared_up: SharedUp, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="model_name 'nope'"):
        AsyncClient(shared_up.config, model_name="nope")
    async with AsyncClient(shared_up.config) as client:
        with pytest.raises(InvalidRequest, match="colour"):
            await client.chat("hi", colour="red")
        with pytest.raises(InvalidRequest, match="thread_id"):
            await client.chat("hi", thread_id="no spaces allowed")
        with pytest.raises(InvalidRequest, match="message"):
            await client.chat("   ")
        with pytest.raises(InvalidRequest, match="is a directory"):
            await client.chat("hi", files=[tmp_path])
        with pytest.raises(NotFound):
            await client.get_thread(str(uuid.uuid4()))


@pytest.mark.permission_violations("a script channel's user is refused what only the gateway may do")
async def test_a_script_channels_credentials_are_refused_where_they_have_no_right(
    shared_up: SharedUp, tmp_path: Path
) -> None:
    code, out, err = await finished(
        await run_antler("creds", "--channel", "clientscripts", cwd=shared_up.workdir)
    )
    assert code == 0, err
    creds = tmp_path / "scripts.json"
    creds.write_text(out, encoding="utf-8")
    assert json.loads(out)["user"].endswith("-client-channel-clientscripts")

    async with AsyncClient(shared_up.config, creds=creds) as client:
        with pytest.raises(NotAllowed, match="has no right") as refused:
            await client.list_skills()
        assert refused.value.subject is not None
        with pytest.raises(NotAllowed):
            await client.chat("may I?")
