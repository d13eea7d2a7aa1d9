"""The chat router with a real runner: scripts and adapters publish chat messages and read replies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NoKeysError, NotFoundError

from bus import (
    AfterEarlier,
    Bus,
    Delivery,
    connect_and_provision,
    decode,
    list_dead_letters,
    provision,
    replay,
)
from bus import chat_partitions as chat_partitions_module
from bus.chat_partitions import chat_in_subject, chat_partitions, publish_inbound
from bus.messages import (
    ChatBinding,
    FileRef,
    InboundMessage,
    MemoryDocument,
    MemoryFact,
    OutboundMessage,
    RunEvent,
    RunRecord,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadRecord,
)
from bus.records import RecordStore
from bus.run_events import events_streams
from bus.service import call
from channels.router import RUN_NAMESPACE
from channels.router import inbound as router_inbound
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.chat import Chat, running_router
from tests.support.runner import StartStack, running_runner
from tests.support.runs import publish_event, stored_events
from tests.support.unsplit import make_unsplit_installation

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def enqueue(config_data: dict[str, Any]) -> None:
    """Each message its own answer, after the one before (chats steer by default); a test that sets
    its own `channels` section chooses again."""
    config_data["channels"] = {"multitask_strategy": "enqueue"}


async def test_a_script_with_raw_nats_py_gets_its_reply(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Logs look fine today.", chunk_delay=0.01))
    prefix = bus.config.prefix
    # As the docs' script does: the admin's credentials from the data dir `antler up` wrote.
    admin = json.loads((Path(router_stack.bus.data_dir) / "nats-users.json").read_text())["admin"]
    nc = await nats.connect(nats_url, user=admin["user"], password=admin["password"])
    replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def on_reply(msg: Any) -> None:
        replies.put_nowait(json.loads(msg.data))

    await nc.subscribe(f"{prefix}.chat.out.script", cb=on_reply)
    await nc.jetstream().publish(
        f"{prefix}.chat.in.script",
        json.dumps({"channel": "script", "chat_id": "nightly", "text": "Summarize today's logs"}).encode(),
    )
    seen = []
    while not seen or seen[-1]["kind"] == "partial":
        seen.append(await asyncio.wait_for(replies.get(), 30))
    await nc.close()
    assert seen[-1]["kind"] == "final"
    assert seen[-1]["text"] == "Logs look fine today."
    assert seen[-1]["chat_id"] == "nightly"
    partials = [r["text"] for r in seen[:-1]]
    assert all("Logs look fine today.".startswith(p) for p in partials), "partials are the answer so far"


async def test_a_second_message_during_a_run_is_answered_after_the_first(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(text="first answer", when="one", delay=1), Reply(text="second answer", when="two")
    )
    async with Chat(bus) as chat:
        await chat.say("message one")
        await fake_model.wait_for_requests(1)
        await chat.say("message two")
        first, second = await chat.final(), await chat.final()
    assert (first.text, second.text) == ("first answer", "second answer")
    sent = [
        m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] in ("user", "assistant")
    ]
    assert sent == ["message one", "first answer", "message two"], "one thread, in order"


async def test_a_message_whose_run_is_given_up_gets_one_error_reply_and_the_next_is_answered(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    nats_url: str,
) -> None:
    """The run fails on every delivery (the user's memory, written by a newer Antler, cannot be read)
    and its request is dead-lettered: the chat is told, once, and its next message is answered once
    the cause is gone. Replaying the dead letter afterwards sends the chat nothing more: its message
    was answered (with the error) already."""
    config_data["bus"]["max_deliver"] = 2
    config = app_config()
    memory = await bus.kv(bus.subjects.memory_bucket)
    await memory.put(MemoryDocument.key("cli:u1"), b'{"v": 2, "user_id": "cli:u1", "facts": []}')
    async with running_runner(nats_url, config), running_router(nats_url, config), Chat(bus) as chat:
        await chat.say("remember that I have a cat")
        error = await chat.final()
        assert error.kind == "error"
        assert error.text.startswith("Sorry, I could not finish that: the run was given up: failed 2 times")
        assert error.text.endswith("see `antler dlq`")

        [letter] = [letter for letter in await list_dead_letters(bus) if letter.consumer == "runner"]
        await replay(bus, letter)
        runs_stream = bus.subjects.runs_stream
        for _ in range(400):  # the replayed request is taken and settled
            if (await bus.js.stream_info(runs_stream)).state.messages == 0:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the replayed request was never settled")

        await memory.delete(MemoryDocument.key("cli:u1"))  # the operator fixes the cause
        fake_model.script(Reply(text="Noted: a cat.", when="I have a cat"))
        await chat.say("I have a cat")
        answer = await chat.final()
        assert (answer.kind, answer.text) == ("final", "Noted: a cat."), "nothing else came between"
        others = [
            r for r in [chat.replies.get_nowait() for _ in range(chat.replies.qsize())] if r.kind != "partial"
        ]
    assert others == []
    assert [e.event for e in await stored_events(bus, error.run_id)].count("end") == 1
    assert len(fake_model.agent_requests) == 1, "the replay ran nothing"


async def test_a_platform_retry_of_the_same_message_gets_one_answer(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    async with Chat(bus, "telegram") as chat:
        message = await chat.say("hello once", message_id="m-77")
        retry = message.model_copy()
        # A retry after JetStream's dedupe window: a different Nats-Msg-Id, the same platform message.
        await bus.publish(
            bus.subjects.chat_in("telegram", retry.chat_id), retry, msg_id=message.dedupe_id() + ":late"
        )
        reply = await chat.final()
        with pytest.raises(TimeoutError):
            await chat.final(timeout=2)
    assert reply.text == "You said: hello once"
    assert len(fake_model.agent_requests) == 1


async def test_commands_are_answered_without_a_run(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    async with Chat(bus) as chat:
        await chat.say("/help")
        assert "/new" in (await chat.final()).text
        await chat.say("/status")
        status = await chat.final()
        assert status.kind == "command"
        assert "Model: fake" in status.text
        await chat.say("/models")
        assert "* fake" in (await chat.final()).text
        await chat.say("/models gpt-9")
        assert "There is no model 'gpt-9'" in (await chat.final()).text
        await chat.say("/memory")
        assert "do not remember" in (await chat.final()).text
        store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
        someone_else = MemoryDocument(user_id="cli:u2", facts=[MemoryFact(content="Has a cat")])
        await store.put(MemoryDocument.key("cli:u2"), someone_else)
        mine = MemoryDocument(user_id="cli:u1", facts=[MemoryFact(content="Bakes bread")])
        await store.put(MemoryDocument.key("cli:u1"), mine)
        await chat.say("/memory")
        recalled = (await chat.final()).text
        assert "Bakes bread" in recalled
        assert "Has a cat" not in recalled
        await chat.say("/dance")
        assert "There is no command or skill called /dance" in (await chat.final()).text
    assert fake_model.agent_requests == []


async def test_new_starts_a_fresh_thread(bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig) -> None:
    async with Chat(bus) as chat:
        await chat.say("remember the number 7")
        first = await chat.final()
        await chat.say("/new")
        await chat.final()
        await chat.say("what number?")
        second = await chat.final()
    assert first.thread_id != second.thread_id
    assert [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "user"] == [
        "what number?"
    ]


async def test_a_chat_whose_thread_was_deleted_starts_a_fresh_one(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    async with Chat(bus) as chat:
        await chat.say("remember the number 7")
        first = await chat.final()
        assert first.thread_id is not None
        threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
        thread = await threads.get(first.thread_id)
        assert thread is not None, "the chat's thread is listed like any other"
        assert thread.metadata == {"channel": "cli", "chat_id": "c1"}
        # As the gateway does for DELETE /threads/{id}: the runners delete, the router unbinds.
        request = ThreadDeleteRequest(thread_id=first.thread_id, user_id=thread.user_id)
        await call(bus, "threads", "delete", request, ThreadDeleteReply, timeout=10)
        chats = RecordStore(await bus.kv(bus.subjects.chats_bucket), ChatBinding)
        for _ in range(100):
            if not await chats.keys():
                break
            await asyncio.sleep(0.05)
        await chat.say("what number?")
        second = await chat.final()
    assert second.thread_id != first.thread_id
    assert [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "user"] == [
        "what number?"
    ]


async def test_only_allowed_users_and_mentions_in_groups_get_answers(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_stack: StartStack
) -> None:
    config_data["channels"] = {"telegram": {"allowed_users": ["alice"], "require_mention_in_groups": True}}
    async with start_stack(running_runner, running_router), Chat(bus, "telegram") as chat:
        await chat.say("hi from a stranger", user_id="mallory")
        await chat.say("group chatter", user_id="alice", chat_type="group", chat_id="g1")
        await chat.say("@bot hello", user_id="alice", chat_type="group", chat_id="g1", mentioned=True)
        reply = await chat.final()
        with pytest.raises(TimeoutError):
            await chat.final(timeout=2)
    assert reply.text == "You said: @bot hello"
    assert len(fake_model.agent_requests) == 1, "nothing ran for the others"


async def test_only_assistant_text_reaches_the_chat_and_files_are_listed(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(
            text="Working on it.",
            tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/a.md"]})],
        ),
        Reply(text="Here you go."),
    )
    async with Chat(bus) as chat:
        await chat.say("make a file")
        final = await chat.final()
    assert final.text == "Here you go."
    assert "Presented" not in final.text, "tool results stay out of replies"
    assert [(f.name, f.path) for f in final.files] == [("a.md", "/mnt/user-data/outputs/a.md")]


async def test_a_clarification_and_a_failure_reach_the_chat_readably(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    fake_model.script(Reply(tool_calls=[ToolCall("ask_clarification", {"question": "Which city?"})]))
    async with Chat(bus) as chat:
        await chat.say("weather?")
        question = await chat.final()
        fake_model.script(Reply(text="bad request", status=400))
        await chat.say("Paris")
        failure = await chat.final()
    assert (question.kind, question.text) == ("clarification", "Which city?")
    assert failure.kind == "error"
    assert failure.text.startswith("Sorry, I could not finish that:")


async def test_a_router_restarted_mid_run_still_delivers_the_reply_once(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, app_config: Callable[[], AppConfig]
) -> None:
    config = app_config()
    fake_model.script(Reply(text="worth the wait", delay=2))
    async with running_runner(nats_url, config), Chat(bus) as chat:
        async with running_router(nats_url, config):
            await chat.say("slow one")
            await fake_model.wait_for_requests(1)
        # the router is gone while the run goes on
        async with running_router(nats_url, config):
            reply = await chat.final()
            with pytest.raises(TimeoutError):
                await chat.final(timeout=2)
    assert reply.text == "worth the wait"
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    assert len(await store.keys()) == 1


async def test_a_chats_message_waits_while_an_earlier_one_of_the_chat_is_still_unhandled(
    bus: Bus, app_config: Callable[[], AppConfig]
) -> None:
    """A nats-server killed just after handing a chat's message to the router: the message is lost on
    the way and comes again only after the ack wait, while the chat's next message, sent once the
    server is back, comes at once. A router's first look at a chat since it (re)connected finds the
    earlier message still in the work queue, unhandled, and defers the next one until it is gone."""
    router = await router_inbound.Router.open(bus, app_config())
    first = InboundMessage(channel="cli", chat_id="c-lost", text="apples", user_id="u1")
    second = InboundMessage(channel="cli", chat_id="c-lost", text="pears", user_id="u1")
    for message in (first, second):
        await publish_inbound(bus, "cli", message)
    subject = await chat_in_subject(bus, "cli", "c-lost")
    stream = bus.subjects.chat_in_partition_stream(int(subject.rsplit(".", 1)[-1]))
    taker = await bus.js.pull_subscribe(subject, stream=stream)  # no router's durable yet: ours
    lost, later = await taker.fetch(2, timeout=10)

    def delivered(msg: Any) -> Delivery:
        return Delivery(msg, msg.subject, {}, 1, msg.metadata.sequence.stream)

    with pytest.raises(AfterEarlier) as waits:
        await router.on_inbound(decode(InboundMessage, later.data), delivered(later))
    assert waits.value.seq == lost.metadata.sequence.stream
    await lost.ack_sync()  # handled: gone from the work queue
    await router.on_inbound(decode(InboundMessage, later.data), delivered(later))
    records = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    assert await records.get(str(uuid.uuid5(RUN_NAMESPACE, second.dedupe_id()))) is not None
    await taker.unsubscribe()


async def test_a_message_whose_run_could_not_be_queued_is_answered_once_it_can_be(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs stream refuses requests for a while (in a cluster: its node died and it elects a new
    leader) after the router has recorded the run: the message's next delivery queues it."""
    # The router tries again in place first (~16 s of pauses); shorter here, to reach the redelivery.
    monkeypatch.setattr(router_inbound, "INLINE_RETRIES", (0.05, 0.1))
    stream = (await bus.js.stream_info(bus.subjects.runs_stream)).config
    taken = list(stream.subjects or [])
    stream.subjects = [f"{bus.config.prefix}.runs.parked"]  # nothing stores run requests now
    await bus.js.update_stream(stream)
    records = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    async with Chat(bus) as chat:
        message = await chat.say("are you there?")
        run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        # The run is recorded, its request refused, and the message delivered again.
        while True:
            if await records.get(run_id) is not None:  # (the router's consumer exists by now)
                inbound = [
                    consumer
                    for k in range(await chat_partitions(bus))
                    for consumer in await bus.js.consumers_info(bus.subjects.chat_in_partition_stream(k))
                ]
                if any(c.num_redelivered for c in inbound if c.name.startswith("router-in-")):
                    break
            await asyncio.sleep(0.05)
        stream.subjects = taken
        await bus.js.update_stream(stream)
        reply = await chat.final()
        with pytest.raises(TimeoutError):
            await chat.final(timeout=2)
    assert reply.text == "You said: are you there?"
    assert len(fake_model.agent_requests) == 1


async def test_a_final_reply_cut_short_is_sent_with_the_answer_it_had_collected(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, app_config: Callable[[], AppConfig]
) -> None:
    """Sending the final reply fails (in a cluster: CHAT_OUT's node died) and the run's earlier
    events cannot be read back meanwhile: the next delivery of `end` still answers with the text the
    router had collected, not "(no answer)"."""
    base = app_config()
    # One partial at once, then none until the end: only the final's send can fail below. (Longer
    # than any machine has been up: the first partial goes out at once whatever the clock says.)
    channels = base.channels.model_copy(update={"stream_update_seconds": 1e12})
    config = base.model_copy(update={"channels": channels})
    fake_model.script(Reply(text="The herd has nine deer.", chunk_delay=0.1))
    out = (await bus.js.stream_info(bus.subjects.chat_out_stream)).config
    taken = list(out.subjects or [])
    async with running_runner(nats_url, config), running_router(nats_url, config), Chat(bus) as chat:
        message = await chat.say("how many deer?")
        assert (await asyncio.wait_for(chat.replies.get(), 30)).kind == "partial"
        out.subjects = [f"{bus.config.prefix}.chat.parked"]  # nothing stores replies now
        await bus.js.update_stream(out)
        run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        (events,) = await events_streams(bus, run_id)
        log = await bus.js.subscribe(bus.subjects.run_events(run_id), stream=events, ordered_consumer=True)
        stored = [await log.next_msg(timeout=30)]
        while json.loads(stored[-1].data)["event"] != "end":
            stored.append(await log.next_msg(timeout=30))
        await log.unsubscribe()
        # The run's log loses everything before its `end` (a reader could not get it in time).
        for msg in stored[:-1]:
            await bus.js.delete_msg(events, msg.metadata.sequence.stream)
        durable = f"router-ev-{stored[-1].subject.rsplit('.', 1)[-1]}"
        for _ in range(600):  # the final failed, and `end` is delivered again
            if (await bus.js.consumer_info(events, durable)).num_redelivered:
                break
            await asyncio.sleep(0.05)
        out.subjects = taken
        await bus.js.update_stream(out)
        # What adapters deliver: the final CHAT_OUT stores (a watcher on the subject itself also
        # saw the send that failed to be stored).
        stored_out = await bus.js.subscribe(bus.subjects.chat_out("cli"), ordered_consumer=True)
        while (
            reply := decode(OutboundMessage, (await stored_out.next_msg(timeout=60)).data)
        ).kind != "final":
            pass
        await stored_out.unsubscribe()
    assert reply.text == "The herd has nine deer."


async def test_every_reply_answers_its_own_message_when_chats_send_fast(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    chats, per_chat = 6, 4
    sent: dict[str, str] = {}
    async with Chat(bus) as chat:
        for turn in range(per_chat):
            for c in range(chats):
                text = f"chat {c} message {turn}"
                message = await chat.say(text, chat_id=f"flood-{c}", message_id=f"m-{c}-{turn}")
                sent[message.message_id or ""] = text
        answers: dict[str, str] = {}
        while len(answers) < len(sent):
            reply = await chat.final(timeout=60)
            assert reply.reply_to not in answers, f"a second final reply to {reply.reply_to}"
            answers[reply.reply_to or ""] = reply.text
    wrong = {m: (sent[m], a) for m, a in answers.items() if a != f"You said: {sent[m]}"}
    assert wrong == {}, "each reply answers the message it replies to"


async def test_a_chat_sees_subagent_progress_as_a_status_line_not_their_output(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    from tests.support.subagents import running_executor, task_call

    config_data["channels"] = {"stream_update_seconds": 0, "subagent_enabled": True}
    config = app_config()
    release = asyncio.Event()
    fake_model.script(
        Reply(text="Let me split this up.", tool_calls=[task_call("call_x", "Check the logs")]),
        Reply(text="SECRET RAW LOG LINE: 3 errors", when="Check the logs", hold=release),
        Reply(text="The logs show 3 errors.", when="3 errors"),
    )
    async with (
        running_runner(nats_url, config),
        running_executor(nats_url, config),
        running_router(nats_url, config),
        Chat(bus) as chat,
    ):
        await chat.say("what is in the logs?")
        partials: list[str] = []
        while not any("working on: do call_x" in p for p in partials):
            partials.append((await asyncio.wait_for(chat.replies.get(), 30)).text)
        release.set()
        final = await chat.final()
    assert "[subtasks: 0 of 1 done; working on: do call_x]" in partials[-1]
    assert final.text == "The logs show 3 errors."
    assert "SECRET" not in final.text


async def test_routers_serve_the_partitions_the_streams_have_whatever_their_own_setting(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, app_config: Callable[[], AppConfig]
) -> None:
    """An installation made when 16 partitions were the default, its components now started with
    none set (a new installation would get 4): chats in partitions 4 to 15 are answered too."""
    older = await connect_and_provision(nats_url, bus.config.model_copy(update={"chat_partitions": 16}))
    await older.close()
    config = app_config()
    assert config.bus.chat_partitions is None
    async with running_runner(nats_url, config), running_router(nats_url, config), Chat(bus) as chat:
        assert await chat_partitions(bus) == 16
        # Twelve chats: the chance that none lands in partitions 4 to 15 is 4**-12.
        for c in range(12):
            await chat.say(f"hello from {c}", chat_id=f"spread-{c}", message_id=f"m-{c}")
        answers = {(await chat.final(timeout=60)).reply_to for _ in range(12)}
    assert answers == {f"m-{c}" for c in range(12)}


async def test_a_router_follows_a_partition_count_changed_while_it_runs(
    bus: Bus,
    nats_url: str,
    fake_model: FakeOpenAI,
    start_stack: StartStack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operator raises the count and provisions (nothing waits in CHAT_IN): the chats that now
    fall in the new partitions are answered by the routers already running, without a restart.

    Every process goes on with the count it read last for a while (`PUBLISHER_REFRESH`): here for
    the whole test, so the router still has 8 when messages come after the count went back to 4
    (the answers of three of the four chats were lost that way: their runs' events went to a
    partition stream no router read any more)."""
    monkeypatch.setattr(chat_partitions_module, "PUBLISHER_REFRESH", 3600.0)
    async with start_stack(running_runner, running_router), Chat(bus) as chat:
        assert await chat_partitions(bus) == 4
        raised = await connect_and_provision(nats_url, bus.config.model_copy(update={"chat_partitions": 8}))
        await raised.close()
        assert await chat_partitions(bus) == 8
        # Twelve chats: the chance that none lands in partitions 4 to 7 is 2**-12.
        for c in range(12):
            await chat.say(f"hello from {c}", chat_id=f"raised-{c}", message_id=f"r-{c}")
        answers = {(await chat.final(timeout=60)).reply_to for _ in range(12)}
        assert answers == {f"r-{c}" for c in range(12)}

        # And back to 4: partitions 4 to 7 are drained and given back; every chat is still answered.
        lowered = await connect_and_provision(nats_url, bus.config.model_copy(update={"chat_partitions": 4}))
        await lowered.close()
        leases = await bus.kv(bus.subjects.leases_bucket)
        for _ in range(300):
            try:
                keys = await leases.keys()
            except NoKeysError:  # every lease lapsed or given back at this instant
                keys = []
            held = {key for key in keys if key.startswith("router.partition.")}
            if held == {f"router.partition.{k}" for k in range(4)}:
                break
            await asyncio.sleep(0.05)
        assert held == {f"router.partition.{k}" for k in range(4)}
        for c in range(4):
            await chat.say(f"again from {c}", chat_id=f"raised-{c}", message_id=f"a-{c}")
        again = {(await chat.final(timeout=60)).reply_to for _ in range(4)}
    assert again == {f"a-{c}" for c in range(4)}


async def test_messages_waiting_in_the_single_chat_in_of_before_the_split_are_answered_after_the_move(
    bus: Bus,
    nats_url: str,
    fake_model: FakeOpenAI,
    app_config: Callable[[], AppConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An installation upgraded with messages waiting in its old CHAT_IN: the upgraded components
    provision the partition streams and drain the old stream, so every waiting message is answered;
    `antler provision` then removes the empty old stream, and chats go on through the new ones."""
    caplog.set_level(logging.INFO, logger="channels.router.partitions")
    old = await make_unsplit_installation(nats_url, bus.config, waiting=6)
    await old.close()
    config = app_config()
    async with Chat(bus) as chat:
        async with running_runner(nats_url, config), running_router(nats_url, config):
            answered = {(await chat.final(timeout=60)).reply_to for _ in range(6)}
            assert answered == {f"old-{n}" for n in range(6)}, "what waited before the move is answered"
            await provision(bus, retire=True)
            with pytest.raises(NotFoundError):
                await bus.js.stream_info(bus.subjects.unsplit_chat_in_stream)
            for c in range(6):
                await chat.say(f"after the move {c}", chat_id=f"before-{c}", message_id=f"new-{c}")
            after = {(await chat.final(timeout=60)).reply_to for _ in range(6)}
            # And the router stops asking the removed stream for messages (at its next look).
            for _ in range(200):
                if "is gone (drained); stopped its consumers" in caplog.text:
                    break
                await asyncio.sleep(0.05)
            assert "is gone (drained); stopped its consumers" in caplog.text
    assert after == {f"new-{c}" for c in range(6)}


async def projection_ready(bus: Bus) -> None:
    """Until the router's projection has the durable of every partition: it reads only events newer
    than that."""
    count = await chat_partitions(bus)
    for _ in range(600):
        with contextlib.suppress(Exception):
            for partition in range(count):
                await bus.js.consumer_info(
                    bus.subjects.run_events_partition_stream(partition), f"router-ev-{partition}"
                )
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the router's projection never started")


async def test_two_deliveries_of_one_run_at_once_answer_with_the_words_of_the_one_that_ended(
    bus: Bus, app_config: Callable[[], AppConfig], nats_url: str
) -> None:
    """A runner process stalled past ack_wait: the run is delivered again to another process while the
    first still streams. The first ends first; its final reply is its own whole answer, not the text
    the second delivery has streamed so far."""
    config = app_config()
    origin = {"channel": "cli", "chat_id": "c-two", "message_id": "m-1", "user_id": "u1"}
    run_id, thread_id = str(uuid.uuid4()), str(uuid.uuid4())
    record = RunRecord(run_id=run_id, thread_id=thread_id, user_id="cli:u1", metadata={"origin": origin})
    await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).create(run_id, record)

    def delta(text: str, message: str, seq: int, attempt: int) -> RunEvent:
        chunk = {"type": "AIMessageChunk", "id": message, "content": text}
        return RunEvent(
            run_id=run_id, thread_id=thread_id, seq=seq, attempt=attempt, event="messages", data=[chunk, {}]
        )

    events = [
        delta("The whole ", "first", 1, 1),
        delta("answer.", "first", 2, 1),
        delta("The sec", "second", 3, 2),  # the second delivery starts streaming its own message
        RunEvent(
            run_id=run_id, thread_id=thread_id, seq=3, attempt=1, event="end", data={"status": "success"}
        ),
    ]
    async with running_router(nats_url, config), Chat(bus) as chat:
        await projection_ready(bus)
        for event in events:
            await publish_event(bus, event, ("cli", "c-two"))
        final = await chat.final()
    assert final.kind == "final"
    assert final.text == "The whole answer.", final


async def as_adapter(bus: Bus, config: AppConfig, channel: str) -> nats.NATS:
    """A connection as the adapter of `channel` logs in (its own NATS user from the data dir)."""
    from bus.permissions import inbox_prefix as inbox_of

    user = json.loads((Path(config.bus.data_dir) / "nats-users.json").read_text())[channel]
    return await nats.connect(
        bus.url, user=user["user"], password=user["password"], inbox_prefix=inbox_of(bus.subjects, channel)
    )


async def dead_letter_reasons(bus: Bus, count: int) -> list[str]:
    for _ in range(200):
        letters = await list_dead_letters(bus)
        if len(letters) >= count:
            return [letter.reason for letter in letters]
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} dead letters")


async def test_an_adapter_cannot_speak_for_another_channel(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    """The Telegram adapter's user says its message comes from a Slack chat: the router believes the
    subject (the adapter's right), not the body: dead-lettered, nothing bound, nothing answered."""
    spoof = InboundMessage(channel="slack", chat_id="C-victim", user_id="U-victim", text="hello")
    nc = await as_adapter(bus, router_stack, "telegram")
    try:
        await nc.jetstream().publish(
            bus.subjects.chat_in("telegram", spoof.chat_id), spoof.model_dump_json().encode()
        )
    finally:
        await nc.close()
    [reason] = await dead_letter_reasons(bus, 1)
    assert "does not match the subject" in reason
    chats = RecordStore(await bus.kv(bus.subjects.chats_bucket), ChatBinding)
    assert await chats.get("slack.C-victim") is None
    assert fake_model.agent_requests == []


async def test_a_message_naming_a_file_it_did_not_stage_moves_and_deletes_nothing(
    bus: Bus, fake_model: FakeOpenAI, router_stack: AppConfig
) -> None:
    store = await bus.files()
    victims = "uploads/telegram:bob/thread-b/secret.txt"
    await store.put(victims, b"bob's secret")
    message = InboundMessage(
        channel="telegram",
        chat_id="mallory",
        user_id="mallory",
        text="read this",
        files=[FileRef(name="secret.txt", object_name=victims)],
    )
    nc = await as_adapter(bus, router_stack, "telegram")
    try:
        await nc.jetstream().publish(
            bus.subjects.chat_in("telegram", message.chat_id), message.model_dump_json().encode()
        )
    finally:
        await nc.close()
    [reason] = await dead_letter_reasons(bus, 1)
    assert "was not staged for this chat" in reason
    assert (await store.get(victims)).data == b"bob's secret", "the original is where it was"
    assert fake_model.agent_requests == []


async def test_a_threads_finals_go_out_in_the_order_its_messages_were_sent(
    bus: Bus, start_stack: StartStack
) -> None:
    """The second run of a chat ended before the first's `end` reached the router (a stalled runner
    process frees the thread just before it publishes `end`): the chat still gets the answers in the
    order it asked."""
    async with start_stack(running_router), Chat(bus) as chat:
        first = await chat.say("question one", chat_id="c-order")
        second = await chat.say("question two", chat_id="c-order")
        runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
        run_ids = [str(uuid.uuid5(RUN_NAMESPACE, m.dedupe_id())) for m in (first, second)]
        records = []
        for run_id in run_ids:  # submitted by the router (no runner here: the test plays it)
            for _ in range(600):
                if (record := await runs.get(run_id)) is not None:
                    records.append(record)
                    break
                await asyncio.sleep(0.05)
        assert len(records) == 2
        await projection_ready(bus)

        async def answer(record: RunRecord, text: str) -> None:
            chunk = {"type": "AIMessageChunk", "id": f"ai-{record.run_id}", "content": text}
            for seq, (event, data) in enumerate(
                [("messages", [chunk, {}]), ("end", {"status": "success"})], start=1
            ):
                origin = record.metadata["origin"]
                await publish_event(
                    bus,
                    RunEvent(
                        run_id=record.run_id, thread_id=record.thread_id, seq=seq, event=event, data=data
                    ),
                    (origin["channel"], origin["chat_id"]),
                )

        await answer(records[1], "answer two")  # the later run's end is stored first
        await asyncio.sleep(0.5)  # and handled: its final would go out now
        await answer(records[0], "answer one")
        finals = [(await chat.final()).text, (await chat.final()).text]
    assert finals == ["answer one", "answer two"]
