"""Joining a run's SSE stream with `Last-Event-ID`: resume, close at the end, refuse ids that are not ours."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from bus import Bus
from bus.run_events import events_streams
from gateway.sse import HEARTBEAT_SECONDS, InvalidLastEventId, Resume, seq_of
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway import sse_events, sse_frames, streamed_answer

HI = {"messages": [{"role": "user", "content": "Hello there"}]}


async def read_events(response: httpx.Response) -> list[tuple[str, str]]:
    """(id, event name) of every event with an id, in order."""
    return [event async for event in sse_events(response)]


async def finished_run(
    http: httpx.AsyncClient, *, stateless: bool = False
) -> tuple[str, list[tuple[str, str]]]:
    """Stream a run to its end: the join-stream URL (`Location`) and every event it sent."""
    body = {"assistant_id": "lead_agent", "input": HI, "stream_mode": ["values"]}
    path = (
        "/runs/stream"
        if stateless
        else f"/threads/{(await http.post('/threads', json={})).json()['thread_id']}/runs/stream"
    )
    async with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        # What compressing proxies (Next.js, nginx) need to stream rather than buffer the whole run.
        assert response.headers["cache-control"] == "no-cache, no-transform"
        assert response.headers["x-accel-buffering"] == "no"
        location = response.headers["location"]
        events = await read_events(response)
    assert events[-1][1] == "end"
    return location.removeprefix("/api"), events


async def join(
    http: httpx.AsyncClient, location: str, last_event_id: str
) -> tuple[int, list[tuple[str, str]]]:
    """Join a stream; it must finish well before the first heartbeat would be due."""

    async def read() -> tuple[int, list[tuple[str, str]]]:
        async with http.stream("GET", location, headers={"Last-Event-ID": last_event_id}) as response:
            if response.status_code != 200:
                await response.aread()
                return response.status_code, []
            return 200, await read_events(response)

    return await asyncio.wait_for(read(), HEARTBEAT_SECONDS - 1)


@pytest.mark.parametrize(
    ("value", "resume"),
    [
        pytest.param(None, Resume(0, 0), id="no-header"),
        pytest.param("", Resume(0, 0), id="empty"),
        pytest.param("-1", Resume(0, 0), id="minus-one-means-all"),
        pytest.param("1767225600000-7", Resume(7, 0), id="ms-seq"),
        pytest.param(" 1767225600000-7 ", Resume(7, 0), id="surrounding-space"),
        # A live delta's id: part 2 of the stored event 7 was the last shown, so 0, 1 and 2 were.
        pytest.param("1767225600000-7.2", Resume(6, 3), id="live-part"),
    ],
)
def test_last_event_ids_name_where_to_resume(value: str | None, resume: Resume) -> None:
    assert seq_of(value) == resume


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("abc", id="word"),
        pytest.param("12-x", id="seq-not-a-number"),
        pytest.param("7", id="bare-number"),
        pytest.param("1-2-3", id="three-parts"),
        pytest.param("-5", id="negative"),
        pytest.param("1767225600000-7.x", id="part-not-a-number"),
        pytest.param("1767225600000-7.2.1", id="two-parts"),
    ],
)
def test_other_last_event_ids_are_refused(value: str) -> None:
    with pytest.raises(InvalidLastEventId, match="Last-Event-ID"):
        seq_of(value)


@pytest.mark.parametrize("stateless", [pytest.param(False, id="thread"), pytest.param(True, id="stateless")])
async def test_joining_a_finished_run_at_its_end_closes_at_once(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, stateless: bool
) -> None:
    fake_model.script(Reply(text="done"))
    location, events = await finished_run(http, stateless=stateless)
    end_id = events[-1][0]
    ms = end_id.split("-")[0]
    assert await join(http, location, end_id) == (200, [])
    assert await join(http, location, f"{ms}-{len(events) + 50}") == (200, []), "past the end"


async def test_joining_a_finished_run_replays_what_came_after_the_id(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="done"))
    location, events = await finished_run(http)
    assert await join(http, location, events[1][0]) == (200, events[2:])
    assert await join(http, location, "-1") == (200, events)


async def test_a_garbage_last_event_id_is_a_400_that_says_what_to_send(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(Reply(text="done"))
    location, _ = await finished_run(http)
    response = await http.get(location, headers={"Last-Event-ID": "not-an-id"})
    assert response.status_code == 400
    assert "Last-Event-ID 'not-an-id' is not an event id" in response.json()["detail"]


async def every_event(http: httpx.AsyncClient, location: str, last_event_id: str) -> list[tuple[str, dict]]:
    """(event name, data) of every event, id-less ones too."""
    found: list[tuple[str, dict]] = []
    event = None
    async with http.stream("GET", location, headers={"Last-Event-ID": last_event_id}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event:
                found.append((event, json.loads(line[6:])))
                event = None
    return found


async def test_events_the_log_no_longer_holds_are_announced_as_a_gap(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, bus: Bus
) -> None:
    fake_model.script(Reply(text="an answer long enough to stream in a few pieces"))
    location, events = await finished_run(http)
    run_id = location.rstrip("/").split("/")[-2]
    s = bus.subjects
    (stream,) = await events_streams(bus, run_id)
    await bus.js.purge_stream(stream, subject=s.run_events(run_id), keep=2)  # aged out
    partly = await asyncio.wait_for(every_event(http, location, events[0][0]), 10)
    assert partly[0][0] == "gap"
    assert partly[0][1]["code"] == "stream_replay_gap"
    assert partly[0][1]["earliest_available_event_id"] == events[-2][0]
    assert [name for name, _ in partly[1:]] == [events[-2][1], "end"], "then what is still there"

    await bus.js.purge_stream(stream, subject=s.run_events(run_id))  # all gone
    gone = await asyncio.wait_for(every_event(http, location, "-1"), 10)
    assert [name for name, _ in gone] == ["gap", "end"], "never a stream that waits forever"
    assert gone[1][1]["status"] == "success"


async def test_streamed_text_comes_live_and_a_client_resuming_mid_way_gets_only_the_rest(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    answer = " ".join(f"word{i}" for i in range(40))
    fake_model.script(Reply(text=answer, chunk_delay=0.03))  # ~1.2 s of streaming, as a real model
    thread_id = (await http.post("/threads", json={})).json()["thread_id"]
    body = {"assistant_id": "lead_agent", "input": HI, "stream_mode": ["messages-tuple"]}
    async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
        location = response.headers["location"].removeprefix("/api")
        events = [f async for f in sse_frames(response)]
    assert streamed_answer(events) == answer, "every word once, in order"
    live = [i for i, (id_, _, _) in enumerate(events) if id_ is not None and "." in id_]
    assert live, "text between the stored events came live (ids `<ms>-<seq>.<part>`)"

    middle = live[len(live) // 2]
    async with http.stream("GET", location, headers={"Last-Event-ID": events[middle][0] or ""}) as again:
        assert again.status_code == 200
        rest = [f async for f in sse_frames(again)]
    assert streamed_answer(rest) == streamed_answer(events[middle + 1 :]), "the rest of the text, none twice"
    assert rest[-1][1] == "end"
