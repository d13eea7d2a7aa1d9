"""The client's goals and scheduled tasks, its stream following a goal's runs until it is done, and
skills installed from a thread's outputs, against an Antler of its own (`AsyncClient.embedded`: its
scripted model's goal verdicts are this module's alone). Answers are held to the gateway's: parsed
through its response model where it has one, equal to its JSON for the same question otherwise."""

from __future__ import annotations

import asyncio
import io
import json
import time
import uuid
import zipfile
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from antler.client import AsyncClient, InvalidRequest, NotFound
from bus.files import output_key
from gateway.rest.goal import GoalAnswer
from gateway.rest.skills import SkillInstalled
from tests.client.conftest import conforms
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("client-embedded-2")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(model: FakeOpenAI) -> AsyncIterator[AsyncClient]:
    config = {
        "models": [{"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}],
        "runner": {"processes": 1},
    }
    async with AsyncClient.embedded(config) as antler:
        yield antler


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(client: AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    assert client.embedded_dir is not None
    url = (client.embedded_dir / ".antler" / "gateway.url").read_text(encoding="utf-8").strip()
    async with httpx.AsyncClient(base_url=f"{url}/api", timeout=60) as http:
        yield http


async def end_of_run(gateway: httpx.AsyncClient, thread_id: str, run_id: str) -> dict[str, Any]:
    """The `end` of a run, as the gateway streams it."""
    event = None
    async with gateway.stream("GET", f"/threads/{thread_id}/runs/{run_id}/stream") as response:
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == "end":
                return json.loads(line[len("data: ") :])  # type: ignore[no-any-return]
    raise AssertionError(f"run {run_id} streamed no `end`")


async def test_a_goal_is_set_read_and_cleared_as_the_gateway_shows_it(
    client: AsyncClient, gateway: httpx.AsyncClient
) -> None:
    thread = str(uuid.uuid4())  # a new chat's id: setting a goal makes the thread
    set_ = await client.set_goal(thread, "  Count the   herd ", max_continuations=3)
    conforms(GoalAnswer, set_)
    assert set_["goal"]["objective"] == "Count the herd"
    assert (set_["goal"]["status"], set_["goal"]["max_continuations"]) == ("active", 3)
    read = await client.get_goal(thread)
    assert read == set_
    assert read == (await gateway.get(f"/threads/{thread}/goal")).json()

    assert await client.clear_goal(thread) == {"goal": None}
    assert await client.get_goal(thread) == {"goal": None}
    assert (await gateway.get(f"/threads/{thread}/goal")).json() == {"goal": None}

    with pytest.raises(InvalidRequest, match="objective"):
        await client.set_goal(thread, "   ")
    with pytest.raises(InvalidRequest, match="max_continuations"):
        await client.set_goal(thread, "too many", max_continuations=99)
    with pytest.raises(NotFound):
        await client.get_goal(str(uuid.uuid4()))


async def test_a_streamed_turn_follows_its_goal_through_the_runs_antler_starts_until_it_is_done(
    client: AsyncClient, model: FakeOpenAI, gateway: httpx.AsyncClient
) -> None:
    mark = uuid.uuid4().hex[:8]
    thread = str(uuid.uuid4())
    await client.set_goal(thread, f"A haiku {mark} and its title")
    model.script(
        Reply(text=f"An old silent pond {mark}", when=f"haiku {mark}"),
        Reply(text=f"Title: Pond {mark}", when=f"title it {mark}"),
    )
    model.verdicts(
        {"verdict": "continue", "reason": "no title", "next_step": f"title it {mark}"}, {"verdict": "done"}
    )

    events = [e async for e in client.stream(f"Write a haiku {mark}", thread)]

    ends = [e for e in events if e.type == "end"]
    assert len(ends) == 1  # one turn for the caller, as DeerFlow streams a goal's continuations
    assert events[-1] is ends[0]
    assert ends[0].data["goal"]["verdict"] == "done"
    texts: dict[str, str] = {}
    for e in events:
        if e.type == "messages-tuple" and e.data["type"] == "ai" and e.data["content"]:
            texts[e.data["id"]] = texts.get(e.data["id"], "") + e.data["content"]
    assert list(texts.values()) == [f"An old silent pond {mark}", f"Title: Pond {mark}"]
    assert ends[0].data["usage"]["total_tokens"] > 0
    assert await client.get_goal(thread) == {"goal": None}  # reached: cleared
    assert client.last_run_id is not None
    runs = [r["run_id"] for r in (await gateway.get(f"/threads/{thread}/runs")).json()]
    assert len(runs) == 2  # the user's run and the one Antler started for the goal
    assert client.last_run_id in runs  # the continuation's, the last the stream followed


async def test_without_follow_goal_the_stream_ends_with_its_run_and_names_the_next(
    client: AsyncClient, model: FakeOpenAI, gateway: httpx.AsyncClient
) -> None:
    mark = uuid.uuid4().hex[:8]
    thread = str(uuid.uuid4())
    await client.set_goal(thread, f"Two lines {mark}")
    model.verdicts(
        {"verdict": "continue", "reason": "one more", "next_step": f"second line {mark}"}, {"verdict": "done"}
    )

    answer = await client.chat(f"first line {mark}", thread, follow_goal=False)
    first_run = client.last_run_id
    assert answer == f"You said: first line {mark}"
    assert first_run is not None
    events = [e async for e in client.stream(f"again {mark}", str(uuid.uuid4()), follow_goal=False)]
    assert "goal" not in events[-1].data  # a thread without a goal: nothing said about one

    ended = await end_of_run(gateway, thread, first_run)
    next_run = ended["goal"]["next_run_id"]
    assert next_run
    assert (await end_of_run(gateway, thread, next_run))["goal"]["verdict"] == "done"


MORNINGS = {
    "title": "Morning herd count",
    "prompt": "Count the herd",
    "schedule_type": "cron",
    "schedule_spec": {"cron": "0 8 * * 1-5"},
    "timezone": "Europe/Berlin",
}


async def test_scheduled_tasks_are_made_changed_fired_and_deleted_as_through_the_gateway(
    client: AsyncClient, gateway: httpx.AsyncClient
) -> None:
    task = await client.create_scheduled_task(**MORNINGS)
    task_id = task["id"]
    assert (task["status"], task["timezone"], task["schedule_spec"]) == (
        "enabled",
        "Europe/Berlin",
        {"cron": "0 8 * * 1-5"},
    )
    assert (
        await client.get_scheduled_task(task_id) == (await gateway.get(f"/scheduled-tasks/{task_id}")).json()
    )
    listed = await client.list_scheduled_tasks()
    assert listed == (await gateway.get("/scheduled-tasks")).json()
    assert task_id in [t["id"] for t in listed]

    changed = await client.update_scheduled_task(task_id, title="Evening herd count")
    assert changed["title"] == "Evening herd count"
    assert (await client.pause_scheduled_task(task_id))["status"] == "paused"
    assert (await client.resume_scheduled_task(task_id))["status"] == "enabled"
    assert (
        await client.get_scheduled_task(task_id) == (await gateway.get(f"/scheduled-tasks/{task_id}")).json()
    )

    assert await client.trigger_scheduled_task(task_id) == {"id": task_id, "triggered": True}
    history: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while not (history and history[0]["status"] == "success"):
        assert time.monotonic() < deadline, f"the triggered run did not succeed: {history}"
        await asyncio.sleep(0.2)
        history = await client.list_scheduled_task_runs(task_id)
    assert history == (await gateway.get(f"/scheduled-tasks/{task_id}/runs")).json()
    assert history[0]["trigger"] == "manual"

    assert await client.delete_scheduled_task(task_id) == {"id": task_id, "deleted": True}
    with pytest.raises(NotFound):
        await client.get_scheduled_task(task_id)
    assert (await gateway.get(f"/scheduled-tasks/{task_id}")).status_code == 404


async def test_a_task_from_words_and_bad_schedules_are_answered_as_the_gateway_answers(
    client: AsyncClient, gateway: httpx.AsyncClient
) -> None:
    thread = str(uuid.uuid4())
    await client.set_goal(thread, "make the thread")  # a thread of the client's own
    await client.clear_goal(thread)
    task = await client.create_scheduled_task_from_text(
        "every weekday 08:00 Europe/Berlin count the herd", thread
    )
    assert (task["thread_id"], task["context_mode"], task["prompt"]) == (
        thread,
        "reuse_thread",
        "count the herd",
    )
    assert (
        await client.list_scheduled_tasks(thread_id=thread)
        == (await gateway.get(f"/threads/{thread}/scheduled-tasks")).json()
    )
    await client.delete_scheduled_task(task["id"])

    with pytest.raises(InvalidRequest, match="cannot read"):
        await client.create_scheduled_task(**{**MORNINGS, "schedule_spec": {"cron": "0 61 * * *"}})
    with pytest.raises(InvalidRequest, match="unknown time zone"):
        await client.create_scheduled_task(**{**MORNINGS, "timezone": "Mars/Olympus"})
    with pytest.raises(InvalidRequest, match="colour"):
        await client.update_scheduled_task(task["id"], colour="red")
    with pytest.raises(NotFound):
        await client.pause_scheduled_task(str(uuid.uuid4()))


def skill_archive(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            f"{name}/SKILL.md", f"---\nname: {name}\ndescription: Made by the agent.\n---\n# {name}\n"
        )
    return buffer.getvalue()


async def test_a_skill_the_agent_wrote_into_a_threads_outputs_is_installed(
    client: AsyncClient, tmp_path: Any
) -> None:
    thread = str(uuid.uuid4())
    note = tmp_path / "note.txt"
    note.write_text("x", encoding="utf-8")
    await client.upload_files(thread, [note])  # the thread, as a chat with an attachment makes it
    name = f"agent-skill-{uuid.uuid4().hex[:6]}"
    bus = await client.connect()  # what the agent's write_file leaves in the thread's outputs
    await (await bus.files()).put(output_key(client.user_id, thread, f"{name}.skill"), skill_archive(name))

    installed = await client.install_skill(thread_id=thread, path=f"/mnt/user-data/outputs/{name}.skill")
    conforms(SkillInstalled, installed)
    assert installed["skill_name"] == name
    skill = await client.get_skill(name)
    assert skill is not None
    assert skill["category"] == "custom"
    again = await client.install_skill(thread_id=thread, path=f"outputs/{name}.skill")  # the short form
    assert again["skill_name"] == name

    with pytest.raises(FileNotFoundError):
        await client.install_skill(thread_id=thread, path="/mnt/user-data/outputs/none.skill")
    with pytest.raises(InvalidRequest, match="outputs"):
        await client.install_skill(thread_id=thread, path="/mnt/user-data/uploads/note.txt")
    with pytest.raises(InvalidRequest, match="skill_path"):
        await client.install_skill()
    with pytest.raises(NotFound):
        await client.install_skill(thread_id=str(uuid.uuid4()), path=f"outputs/{name}.skill")
