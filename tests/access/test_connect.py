"""One person across chats and the web: `/connect` in a chat gives a one-time code; a signed-in person
redeems it, and the chat's thread is theirs at once (visible in the web API), the chat going on in it
as them. The link is in the audit trail, which only admins may read."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable

import httpx

from bus import Bus
from bus.messages import MemoryFactRequest, MemoryReply
from bus.service import call
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.chat import Chat, running_router
from tests.support.gateway import running_gateway
from tests.support.memory import running_updater
from tests.support.runner import running_runner


@contextlib.asynccontextmanager
async def chat_and_web(
    bus: Bus, nats_url: str, config: AppConfig
) -> AsyncIterator[tuple[Chat, Callable[[str], httpx.AsyncClient]]]:
    """A runner, a router and a gateway; a chat on the bus, and web clients by their token."""
    async with (
        running_runner(nats_url, config),
        running_router(nats_url, config),
        running_gateway(nats_url, config) as base,
        Chat(bus) as chat,
        contextlib.AsyncExitStack() as clients,
    ):

        def web(token: str) -> httpx.AsyncClient:
            client = httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": token}, timeout=30)
            clients.push_async_callback(client.aclose)
            return client

        yield chat, web


async def test_a_chat_user_connects_to_an_account_and_the_chats_thread_becomes_the_accounts(
    bus: Bus, nats_url: str, stack_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    async with (
        running_updater(nats_url, stack_config),
        chat_and_web(bus, nats_url, stack_config) as (chat, web),
    ):
        ana, bob = web("tok-ana"), web("tok-bob")
        learned = MemoryFactRequest(user_id="cli:u1", content="Prefers answers in French")
        await call(bus, "memory", "add_fact", learned, MemoryReply, timeout=10)  # as the agent learned it
        fake_model.script(Reply(text="hi stranger", when="hello before linking"))
        await chat.say("hello before linking")
        assert (await chat.final()).text == "hi stranger"
        assert (await ana.post("/threads/search", json={"limit": 50})).json() == []

        await chat.say("/connect")
        reply = (await chat.final()).text
        code = re.search(r"code: ([A-Z0-9]{4}-[A-Z0-9]{4})", reply)
        assert code, reply

        wrong = await ana.post("/v1/connect", json={"code": "ZZZZ-ZZZZ"})
        assert wrong.status_code == 404
        assert wrong.json()["detail"].startswith("code:")
        linked = await ana.post("/v1/connect", json={"code": code.group(1)})
        assert linked.status_code == 200
        assert linked.json()["chat_user"] == "cli:u1"
        assert linked.json()["user_id"] == "ana"
        [thread] = (await ana.post("/threads/search", json={"limit": 50})).json()
        assert linked.json()["threads"] == [thread["thread_id"]]
        assert linked.json()["facts"] == 1
        remembered = (await ana.get("/memory")).json()["facts"]
        assert [f["content"] for f in remembered] == ["Prefers answers in French"], "one memory"
        assert thread["metadata"]["channel"] == "cli"
        state = (await ana.get(f"/threads/{thread['thread_id']}/state")).json()
        assert [m["content"] for m in state["values"]["messages"]] == ["hello before linking", "hi stranger"]
        again = await bob.post("/v1/connect", json={"code": code.group(1)})
        assert again.status_code == 404  # one-time

        fake_model.script(Reply(text="hi ana", when="hello from the chat"))
        await chat.say("hello from the chat")
        assert (await chat.final()).text == "hi ana"
        # The chat went on in the same thread, now ana's: its earlier turns were in the model's request.
        asked = fake_model.agent_requests[-1]["messages"]
        assert "hello before linking" in [m["content"] for m in asked if m["role"] == "user"]
        threads = (await ana.post("/threads/search", json={"limit": 50})).json()
        assert [t["thread_id"] for t in threads] == [thread["thread_id"]]
        runs = (await ana.get(f"/threads/{thread['thread_id']}/runs")).json()
        assert len(runs) == 2  # the run before the link is ana's too

        trail = await ana.get("/v1/audit", params={"user": "ana", "action": "chat_linked"})
        assert trail.status_code == 200
        assert [r["detail"]["chat_user"] for r in trail.json()["records"]] == ["cli:u1"]
        assert (await bob.get("/v1/audit")).status_code == 403


async def test_a_group_chats_members_talk_in_one_thread_linked_or_not(
    bus: Bus, nats_url: str, stack_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    """A member who is not the thread's owner talks in the group's thread, as before teams; linking one
    member to an account does not split the group's conversation either."""
    group = {"chat_id": "g1", "chat_type": "group", "mentioned": True}
    async with chat_and_web(bus, nats_url, stack_config) as (chat, web):
        ana = web("tok-ana")
        for n, member in enumerate(["m1", "m2", "m1"]):
            fake_model.script(Reply(text=f"answer {n}", when=f"GROUP-{n}"))
            await chat.say(f"GROUP-{n} from {member}", user_id=member, **group)
            assert (await chat.final()).text == f"answer {n}"
        await chat.say("/connect", user_id="m2", **group)
        code = re.search(r"code: ([A-Z0-9]{4}-[A-Z0-9]{4})", (await chat.final()).text)
        assert code
        assert (await ana.post("/v1/connect", json={"code": code.group(1)})).status_code == 200
        fake_model.script(Reply(text="answer 3", when="GROUP-3"))
        await chat.say("GROUP-3 from m2, linked now", user_id="m2", **group)
        assert (await chat.final()).text == "answer 3"
    said = [str(m["content"]) for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "user"]
    assert [next(w for w in s.split() if w.startswith("GROUP-")) for s in said if "GROUP-" in s] == [
        "GROUP-0",
        "GROUP-1",
        "GROUP-2",
        "GROUP-3",
    ]
