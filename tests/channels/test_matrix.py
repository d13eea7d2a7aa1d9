"""Matrix end to end against a real homeserver: Synapse started on loopback by the tests, people
talking to the bot over the client-server API, the adapter through matrix-nio, router and runner as
`antler up` runs them."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from bus.metrics import REGISTRY
from config import AppConfig
from tests.channels.conftest import adapter_processes, copies_ready, writes_and_presents
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.support.adapters import ENQUEUE, adapter_stack
from tests.support.health import adapter, status_of
from tests.support.ports import free_port

pytest.importorskip("synapse", reason="matrix-synapse is not installed (pip install -e '.[dev]')")

from channels.matrix import run as run_matrix
from channels.matrix.adapter import ENCRYPTED_NOTICE
from tests.support.synapse import Homeserver, MatrixUser, shown, synapse

# One worker starts the module's Synapse (a few seconds of CPU each), not every worker that runs one of them.
pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180), pytest.mark.xdist_group("matrix")]

ANSWER = "Matrix rooms are **federated**; this one lives on a loopback Synapse."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    with synapse(Path(tmp_path_factory.mktemp("synapse"))) as started:
        yield started


@pytest.fixture
def homeserver(server: Homeserver) -> str:
    return server.url


@pytest_asyncio.fixture
async def bot(homeserver: str) -> AsyncIterator[MatrixUser]:
    user = await MatrixUser.register(homeserver)
    yield user
    await user.aclose()


@pytest_asyncio.fixture
async def alice(homeserver: str) -> AsyncIterator[MatrixUser]:
    user = await MatrixUser.register(homeserver)
    yield user
    await user.aclose()


@pytest_asyncio.fixture
async def stack(
    nats_url: str,
    homeserver: str,
    bot: MatrixUser,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> AsyncIterator[AppConfig]:
    settings = {
        "homeserver": homeserver,
        "user_id": bot.user_id,
        "access_token": bot.token,
        "device_id": bot.device_id,
    }
    async with adapter_stack(nats_url, config_data, app_config, "matrix", settings, run_matrix) as config:
        yield config


def settings_for(homeserver: str, bot: MatrixUser) -> dict[str, Any]:
    return {
        "homeserver": homeserver,
        "user_id": bot.user_id,
        "access_token": bot.token,
        "device_id": bot.device_id,
    }


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """`check()`'s first truthy result, asked again until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {check}")
        await asyncio.sleep(0.2)


async def joined_by(alice: MatrixUser, room: str, bot: MatrixUser) -> None:
    async def joined() -> bool:
        return bot.user_id in await alice.members(room)

    await until(joined)


async def bot_texts(alice: MatrixUser, room: str, bot: MatrixUser) -> list[str]:
    return shown(await alice.events(room), bot.user_id)


def asked(fake_model: FakeOpenAI) -> list[str]:
    return [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]


async def test_a_direct_message_is_answered_in_one_message_edited_as_it_streams(
    alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text=ANSWER, chunk_delay=0.2))
    room = await alice.create_room(bot.user_id, direct=True)
    await joined_by(alice, room, bot)
    asked_event = await alice.say(room, "where does this room live?")

    async def answered() -> bool:
        return await bot_texts(alice, room, bot) == [ANSWER]

    await until(answered)
    events = [e for e in await alice.events(room) if e["sender"] == bot.user_id]
    first, edits = events[0], events[1:]
    assert first["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == asked_event
    assert edits, "streamed: the message was edited as the answer grew"
    assert all(e["content"]["m.relates_to"]["rel_type"] == "m.replace" for e in edits)
    assert all(ANSWER.startswith(e["content"]["m.new_content"]["body"]) for e in edits)
    assert asked(fake_model) == ["where does this room live?"]
    final = edits[-1]["content"]["m.new_content"]
    assert final["format"] == "org.matrix.custom.html"
    assert "<strong>federated</strong>" in final["formatted_body"], "clients show the Markdown rendered"


async def test_in_a_group_room_only_a_mention_is_answered_and_a_thread_is_answered_in_it(
    homeserver: str, alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    bob = await MatrixUser.register(homeserver)
    room = await alice.create_room(bot.user_id, bob.user_id)
    await joined_by(alice, room, bot)
    await alice.say(room, "just chatting with bob")
    root = await alice.say(room, "a thread about widgets")
    fake_model.script(Reply(text="Widgets, in the thread."))
    await alice.say(
        room,
        f"{bot.user_id}: what are widgets?",
        **{
            "m.mentions": {"user_ids": [bot.user_id]},
            "m.relates_to": {"rel_type": "m.thread", "event_id": root},
        },
    )

    async def answered() -> bool:
        return await bot_texts(alice, room, bot) == ["Widgets, in the thread."]

    await until(answered)
    reply = next(e for e in await alice.events(room) if e["sender"] == bot.user_id)
    assert reply["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert reply["content"]["m.relates_to"]["event_id"] == root
    assert asked(fake_model) == ["what are widgets?"], "the unmentioned messages were not answered"
    fake_model.script(Reply(text="Gadgets too."))
    await alice.say(
        room, "and gadgets?", **{"m.relates_to": {"m.in_reply_to": {"event_id": reply["event_id"]}}}
    )

    async def followed_up() -> bool:
        return "Gadgets too." in await bot_texts(alice, room, bot)

    await until(followed_up)
    assert asked(fake_model)[-1] == "and gadgets?", "a reply to the bot's message needs no mention"
    await bob.aclose()


async def test_an_encrypted_room_is_refused_with_a_notice_and_nothing_is_asked(
    alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    room = await alice.create_room(bot.user_id, direct=True, encrypted=True)
    await joined_by(alice, room, bot)
    ciphertext = {
        "algorithm": "m.megolm.v1.aes-sha2",
        "ciphertext": "AwgAEnACgAkLmt6qF84IK++J7UDH2Za1YVchHyprqTqsg",
        "device_id": alice.device_id,
        "sender_key": "IlRMeOPX2e0MurIyfWEucYBRVOEEUMrOHqn/8mLqMjA",
        "session_id": "X3lUlvLELLYxeTx4yOVu6UDpasGEVO0Jbu+QFnm0cKQ",
    }
    await alice.send(room, ciphertext, "m.room.encrypted")
    await alice.send(room, ciphertext, "m.room.encrypted")

    async def refused() -> list[dict[str, Any]]:
        return [e for e in await alice.events(room) if e["sender"] == bot.user_id]

    notices = await until(refused)
    assert notices[0]["content"] == {"msgtype": "m.notice", "body": ENCRYPTED_NOTICE}
    await alice.say(room, "and in plain text?")  # in an encrypted room, not read either
    fake_model.script(Reply(text="Answered here."))
    plain = await alice.create_room(bot.user_id, direct=True)
    await joined_by(alice, plain, bot)
    await alice.say(plain, "hello elsewhere")

    async def answered() -> bool:
        return await bot_texts(alice, plain, bot) == ["Answered here."]

    await until(answered)  # the bot has seen everything sent before
    assert [e["content"] for e in await refused()] == [notices[0]["content"]], "told once per room"
    assert asked(fake_model) == ["hello elsewhere"]


async def test_a_file_each_way(
    alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(*writes_and_presents("/mnt/user-data/outputs/plan.md", "# Plan\n", "Here is the plan."))
    room = await alice.create_room(bot.user_id, direct=True)
    await joined_by(alice, room, bot)
    uri = await alice.upload("notes.txt", b"buy milk", "text/plain")
    await alice.send(
        room,
        {
            "msgtype": "m.file",
            "body": "notes.txt",
            "filename": "notes.txt",
            "url": uri,
            "info": {"mimetype": "text/plain", "size": 8},
        },
    )

    async def file_sent() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in await alice.events(room)
                if e["sender"] == bot.user_id and e["content"].get("msgtype") == "m.file"
            ),
            None,
        )

    sent = await until(file_sent)
    assert sent["content"]["body"] == "plan.md"
    assert await alice.download(sent["content"]["url"]) == b"# Plan\n"
    first = fake_model.agent_requests[0]["messages"][-1]["content"]
    assert "/mnt/user-data/uploads/notes.txt" in str(first), "the agent is told where the file is"


async def test_a_message_the_adapter_fails_on_is_dead_lettered_and_the_next_is_answered(
    alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    room = await alice.create_room(bot.user_id, direct=True)
    await joined_by(alice, room, bot)
    broken = await alice.send(
        room, {"msgtype": "m.file", "body": "gone.txt", "url": "mxc://localhost/nosuchmedia"}
    )
    fake_model.script(Reply(text="Still here."))
    await alice.say(room, "are you there?")

    async def answered() -> bool:
        return "Still here." in await bot_texts(alice, room, bot)

    await until(answered)
    letters = await list_dead_letters(bus)
    assert len(letters) == 1
    assert broken in letters[0].data.decode()
    assert letters[0].reason.startswith("unreadable matrix message: ")
    assert asked(fake_model) == ["are you there?"]


@pytest.mark.timeout(240)
async def test_the_standby_copy_finishes_the_answer_and_answers_what_came_while_none_synced(
    bus: Bus,
    homeserver: str,
    alice: MatrixUser,
    bot: MatrixUser,
    fake_model: FakeOpenAI,
    nats_url: str,
    tmp_path: Path,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    config_file: Callable[[], Path],
) -> None:
    config_data["bus"]["lease_seconds"] = 4  # a busy machine stalls a process for a second or two
    slow = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    fake_model.script(
        Reply(text=slow, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    async with (
        copies_ready(bus, "matrix") as all_ready,
        adapter_stack(
            nats_url, config_data, app_config, "matrix", settings_for(homeserver, bot), None, ENQUEUE
        ),
        adapter_processes(config_file(), nats_url, tmp_path, 2, "matrix") as procs,
    ):
        await all_ready(procs)
        room = await alice.create_room(bot.user_id, direct=True)
        await joined_by(alice, room, bot)
        await alice.say(room, "tell me slowly")

        async def edited() -> bool:
            return any(
                e["sender"] == bot.user_id and "m.new_content" in e["content"]
                for e in await alice.events(room)
            )

        await until(edited)
        holder = (await (await bus.kv(bus.subjects.leases_bucket)).get("adapter.matrix")).value
        active = next(p for p in procs if f"-{p.pid}-" in (holder or b"").decode())
        os.kill(active.pid, signal.SIGKILL)
        await active.wait()
        await alice.say(room, "and now?")  # while no copy syncs

        async def finished() -> bool:
            return await bot_texts(alice, room, bot) == [slow, "still here"]

        try:
            await until(finished, 120)
        except TimeoutError:
            logs = "\n".join((tmp_path / f"matrix-{n}.log").read_text()[-3000:] for n in range(2))
            pytest.fail(f"the standby did not finish: {await bot_texts(alice, room, bot)}\n{logs}")
    assert asked(fake_model) == ["tell me slowly", "and now?"], "each message became one run"


async def test_with_allowed_users_only_their_invitations_are_taken(
    nats_url: str,
    homeserver: str,
    alice: MatrixUser,
    bot: MatrixUser,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> None:
    mallory = await MatrixUser.register(homeserver)
    settings = {**settings_for(homeserver, bot), "allowed_users": [alice.user_id]}
    async with adapter_stack(nats_url, config_data, app_config, "matrix", settings, run_matrix):
        declined = await mallory.create_room(bot.user_id, direct=True)

        async def left() -> bool:
            return await mallory.membership(declined, bot.user_id) == "leave"

        await until(left)
        room = await alice.create_room(bot.user_id, direct=True)
        await joined_by(alice, room, bot)
    await mallory.aclose()


async def test_the_homeservers_rate_limit_is_waited_out_and_the_answer_arrives_once(
    server: Homeserver, alice: MatrixUser, bot: MatrixUser, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    admin = await MatrixUser.admin(server)
    await admin.limit_messages(bot.user_id, per_second=1, burst=1)
    before = REGISTRY.get_sample_value("antler_chat_rate_limited_total", {"platform": "matrix"}) or 0
    fake_model.script(Reply(text=ANSWER, chunk_delay=0.1))
    room = await alice.create_room(bot.user_id, direct=True)
    await joined_by(alice, room, bot)
    await alice.say(room, "quickly please")

    async def answered() -> bool:
        return await bot_texts(alice, room, bot) == [ANSWER]

    await until(answered, 90)
    after = REGISTRY.get_sample_value("antler_chat_rate_limited_total", {"platform": "matrix"}) or 0
    assert after > before, "Synapse said M_LIMIT_EXCEEDED, and the adapter waited"
    await admin.aclose()


async def test_a_homeserver_out_of_reach_is_unhealthy_and_a_refused_token_is_configuration_to_fix(
    nats_url: str,
    bus: Bus,
    homeserver: str,
    bot: MatrixUser,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> None:
    port = free_port()
    away = {**settings_for(f"http://127.0.0.1:{port}", bot)}
    async with adapter(nats_url, bus, config_data, app_config, "matrix", away, run_matrix) as watch:
        seen = await watch.until(status_of("matrix", "unhealthy"), timeout=90)
    assert f"cannot reach 127.0.0.1:{port}" in seen["matrix"].text, seen
    wrong = {**settings_for(homeserver, bot), "access_token": "syt_WRONG"}
    async with adapter(nats_url, bus, config_data, app_config, "matrix", wrong, run_matrix) as watch:
        seen = await watch.until(status_of("matrix", "unhealthy"), timeout=90)
    text = seen["matrix"].text
    assert text.startswith("the homeserver refused the access token (M_UNKNOWN_TOKEN)"), text
    assert "WRONG" not in text
