"""Long-term memory end to end: runner, memory updater and gateway on a real bus, the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bus import Bus
from bus.agent_store import AgentStore
from bus.messages import MemoryDocument
from bus.records import RecordStore
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.memory import MEMORY_PROMPT, facts, memory_calls, memory_of, memory_reply, running_updater
from tests.support.runner import ask, running_runner, submit_and_collect

pytestmark = pytest.mark.asyncio


@pytest.fixture
def quick_memory(config_data: dict[str, Any]) -> dict[str, Any]:
    config_data["memory"] = {"enabled": True, "debounce_seconds": 0.3}
    config_data["title"] = {"enabled": False}
    return config_data


@pytest_asyncio.fixture
async def stack(
    nats_url: str, quick_memory: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AsyncIterator[AppConfig]:
    config = app_config()
    async with running_runner(nats_url, config), running_updater(nats_url, config):
        yield config


async def test_what_a_user_says_is_remembered_and_reaches_the_next_prompt(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(
        Reply(text="Nice to meet you, Mia!"),
        memory_reply("Mia maintains a Rust compiler", work="Maintains a Rust compiler"),
    )
    await submit_and_collect(bus, ask("t-mia", "I'm Mia, I maintain a Rust compiler", user_id="mia"))
    doc = await memory_of(bus, "mia", lambda d: bool(d.facts))
    assert facts(doc) == ["Mia maintains a Rust compiler"]
    assert doc.facts[0].source == "t-mia"
    assert doc.user.work_context.summary == "Maintains a Rust compiler"
    asked = memory_calls(fake_model)[0]["messages"][-1]["content"]
    assert "User: I'm Mia, I maintain a Rust compiler" in asked
    assert "Assistant: Nice to meet you, Mia!" in asked

    fake_model.script(Reply(text="Sure."))
    await submit_and_collect(bus, ask("t-mia-2", "What should I read next?", user_id="mia"))
    leads = [r for r in fake_model.agent_requests if r["messages"][0]["role"] == "system"]
    system = leads[1]["messages"][0]  # the second run's (memory requests have no system message)
    assert "Mia maintains a Rust compiler" in system["content"]
    assert "Work: Maintains a Rust compiler" in system["content"]


async def test_five_quick_runs_in_one_thread_make_one_memory_call_with_all_of_them(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, quick_memory: dict[str, Any], app_config: Any
) -> None:
    quick_memory["memory"]["debounce_seconds"] = 3
    config = app_config()
    fake_model.script(memory_reply("Likes short answers"))
    async with running_runner(nats_url, config), running_updater(nats_url, config):
        for n in range(5):
            await submit_and_collect(bus, ask("t-five", f"message number {n}", user_id="kai"))
        await memory_of(bus, "kai", lambda d: bool(d.facts))
        await asyncio.sleep(0.5)  # a second call would come right after the first
    calls = memory_calls(fake_model)
    assert len(calls) == 1
    assert all(f"message number {n}" in calls[0]["messages"][-1]["content"] for n in range(5))


async def test_updates_pending_while_the_updater_is_down_are_applied_when_it_returns(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, quick_memory: dict[str, Any], app_config: Any
) -> None:
    config = app_config()
    async with running_runner(nats_url, config):
        for user in ("ana", "ben"):
            await submit_and_collect(bus, ask(f"t-{user}", f"I am {user} and I like chess", user_id=user))
        fake_model.script(memory_reply("Likes chess"), memory_reply("Likes chess"))
        async with running_updater(nats_url, config):
            for user in ("ana", "ben"):
                assert facts(await memory_of(bus, user, lambda d: bool(d.facts))) == ["Likes chess"]


async def test_two_updaters_writing_one_users_memory_at_once_keep_both_facts(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, quick_memory: dict[str, Any], app_config: Any
) -> None:
    config = app_config()
    both_asked = asyncio.Event()
    first, second = memory_reply("Has a dog"), memory_reply("Plays the cello")
    first.hold = second.hold = both_asked
    fake_model.script(first, second)
    async with (
        running_runner(nats_url, config),
        running_updater(nats_url, config),
        running_updater(nats_url, config),
    ):
        for thread in ("t-dog", "t-cello"):
            await submit_and_collect(bus, ask(thread, f"about me, {thread}", user_id="zoe"))
        for _ in range(200):  # each updater took one thread's update and asked the model
            if len(memory_calls(fake_model)) == 2:
                break
            await asyncio.sleep(0.05)
        both_asked.set()
        doc = await memory_of(bus, "zoe", lambda d: len(d.facts) == 2)
    assert sorted(facts(doc)) == ["Has a dog", "Plays the cello"]


async def test_a_malformed_reply_changes_nothing_and_a_fenced_partial_one_only_its_valid_parts(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="this is not json at all", when=MEMORY_PROMPT))
    await submit_and_collect(bus, ask("t-bad", "I live in Oslo", user_id="ola"))
    for _ in range(100):
        if memory_calls(fake_model):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
    assert await store.get(MemoryDocument.key("ola")) is None, "nothing was written"

    mixed = {
        "newFacts": [
            {"content": "Lives in Oslo", "category": "context", "confidence": 0.9},
            {"category": "context"},
            "not a fact",
            {"content": "Maybe likes skiing", "confidence": 0.3},
        ],
        "user": {"topOfMind": {"summary": 42}},
    }
    fake_model.script(Reply(text="```json\n" + json.dumps(mixed)[:-1], when=MEMORY_PROMPT))  # cut short
    await submit_and_collect(bus, ask("t-bad", "Oslo is lovely in winter", user_id="ola"))
    doc = await memory_of(bus, "ola", lambda d: bool(d.facts))
    assert facts(doc) == ["Lives in Oslo"], "the invalid facts and the unsure one are left out"
    assert doc.user.top_of_mind.summary == ""


async def test_users_never_see_each_others_memory_and_export_import_round_trips(
    bus: Bus,
    fake_model: FakeOpenAI,
    nats_url: str,
    quick_memory: dict[str, Any],
    app_config: Any,
    tmp_path: Any,
) -> None:
    from tests.support.gateway import running_gateway

    quick_memory["gateway"] = {
        "port": 0,
        "tokens": [{"token": "tok-ana", "user_id": "ana"}, {"token": "tok-bob", "user_id": "bob"}],
    }
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_updater(nats_url, config),
        running_gateway(nats_url, config) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}) as ana,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-bob"}) as bob,
    ):
        added = await ana.post("/memory/facts", json={"content": "Ana keeps bees", "category": "knowledge"})
        assert added.status_code == 200, added.text
        assert [f["content"] for f in added.json()["facts"]] == ["Ana keeps bees"]
        assert (await ana.post("/memory/facts", json={"content": "ana  keeps bees"})).status_code == 409
        assert (await bob.get("/memory")).json()["facts"] == []
        fake_model.script(Reply(text="Hello Bob."))
        await submit_and_collect(bus, ask("t-bob", "hi", user_id="bob"))
        assert "Ana keeps bees" not in json.dumps(fake_model.agent_requests[-1]["messages"])

        exported = (await ana.get("/memory/export")).json()
        assert exported["facts"][0]["createdAt"]
        assert set(exported) >= {"version", "lastUpdated", "user", "history", "facts"}
        assert set(exported["user"]) == {"workContext", "personalContext", "topOfMind"}
        imported = await bob.post("/memory/import", json=exported)
        assert imported.status_code == 200, imported.text
        again = (await bob.get("/memory/export")).json()
        assert again["facts"] == exported["facts"]
        assert again["user"] == exported["user"]

        fact_id = exported["facts"][0]["id"]
        patched = await ana.patch(f"/memory/facts/{fact_id}", json={"confidence": 0.75})
        assert patched.json()["facts"][0]["confidence"] == 0.75
        assert (await bob.get("/memory")).json()["facts"][0]["confidence"] == 1.0, "bob's copy is his"
        assert (await ana.delete(f"/memory/facts/{fact_id}")).json()["facts"] == []
        assert (await ana.delete("/memory/facts/nope")).status_code == 404
        bad = await ana.post("/memory/import", json={"facts": [{"confidence": 2}]})
        assert bad.status_code == 422
        assert (await bob.delete("/memory")).json()["facts"] == []


async def test_a_custom_agent_keeps_its_own_memory_of_the_user(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Noted."), memory_reply("Prefers tabs over spaces"))
    await (await AgentStore.open(bus)).create("lin", "coder", {"soul": "You write code."})
    coder = {"agent_name": "coder"}
    await submit_and_collect(bus, ask("t-coder", "I prefer tabs", user_id="lin", context=coder))
    store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
    for _ in range(200):
        doc = await store.get(MemoryDocument.key("lin", "coder"))
        if doc is not None and doc.facts:
            break
        await asyncio.sleep(0.05)
    assert doc is not None
    assert facts(doc) == ["Prefers tabs over spaces"]
    assert await store.get(MemoryDocument.key("lin")) is None, "the user's own memory is apart"

    def last_system_prompt() -> str:  # of the last lead request (memory requests have none)
        return next(
            r["messages"][0]["content"]
            for r in reversed(fake_model.agent_requests)
            if r["messages"][0]["role"] == "system"
        )

    await submit_and_collect(bus, ask("t-coder-2", "hello", user_id="lin", context=coder))
    assert "Prefers tabs over spaces" in last_system_prompt()
    await submit_and_collect(bus, ask("t-plain", "hello", user_id="lin"))
    assert "Prefers tabs over spaces" not in last_system_prompt()


def test_users_whose_ids_look_alike_keep_apart_and_a_nan_confidence_spoils_nothing() -> None:
    from memory.extract import parse

    assert MemoryDocument.key("john.smith@corp.com") != MemoryDocument.key("john_smith@corp_com")
    assert MemoryDocument.key("lin", "coder") != MemoryDocument.key("lin")
    change = parse('{"newFacts": [{"content": "Odd", "confidence": NaN}, {"content": "Likes jazz"}]}')
    assert [f["content"] for f in change.new_facts] == ["Likes jazz"]
    assert change.dropped, "the unreadable one is named in the log"


async def test_a_rate_limited_memory_model_is_tried_again_and_the_memory_still_lands(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, quick_memory: dict[str, Any], app_config: Any
) -> None:
    config = app_config()
    async with running_runner(nats_url, config):
        await submit_and_collect(bus, ask("t-zoe", "I am Zoe and I keep bees", user_id="zoe"))
    # More refusals than the update's deliveries: only tries within one delivery get it through.
    fake_model.refuse(4)
    fake_model.script(memory_reply("Keeps bees"))
    async with running_updater(nats_url, config):
        assert facts(await memory_of(bus, "zoe", lambda d: bool(d.facts))) == ["Keeps bees"]
    assert fake_model.refused == 4
    assert len(memory_calls(fake_model)) == 1
