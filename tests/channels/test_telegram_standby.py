"""Two copies of the Telegram adapter: one polls, one stands by. The active one is SIGKILLed mid-answer;
the standby takes over: the answer is finished in the message already shown, a message sent while no
one polled is answered, and Telegram never sees two pollers at once."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from bus import Bus
from bus.chat_partitions import chat_partitions
from bus.leases import Leases, renew_until_lost
from config import AppConfig
from tests.channels.conftest import StartCopies, copy_logs, lease_holder
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.support.eventually import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(150)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


async def test_the_standby_adapter_takes_over_and_finishes_the_answer_once(
    bus: Bus, telegram: FakeTelegram, fake_model: FakeOpenAI, tmp_path: Path, start_copies: StartCopies
) -> None:
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    async with start_copies("telegram", settings) as copies:
        telegram.send_user_message("tell me slowly")
        # Once the message shown has been edited, the adapter's bookkeeping knows it. (Killed
        # between Telegram's answer to the first sendMessage and that record, a copy cannot
        # know the message exists and posts another: the window this test leaves out.)
        await telegram.wait_for("editMessageText", timeout=60)
        # The active copy holds the lease (its value names the holder's pid): kill it mid-answer.
        active = await lease_holder(bus, "telegram", copies)
        os.kill(active.pid, signal.SIGKILL)
        telegram.send_user_message("and now?")  # while no one polls
        for _ in range(1200):
            texts = [p["text"] for m, p in telegram.calls if m in ("sendMessage", "editMessageText")]
            if ANSWER in texts and "still here" in texts:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"the standby did not finish: {texts}\n{copy_logs(tmp_path, 'telegram')}")
        # (Counted before the adapters stop: python-telegram-bot's last poll at shutdown
        # overlaps its own long poll, whatever the number of copies.)
        conflicts = telegram.conflicts
    sent = [p for m, p in telegram.calls if m == "sendMessage"]
    assert [p["text"] for p in sent if p["text"] == "still here"] == ["still here"], "answered once"
    answer_messages = [p for p in sent if ANSWER.startswith(p["text"])]
    assert len(answer_messages) == 1, f"the answer stays in the message it started: {sent}"
    edits = [p for m, p in telegram.calls if m == "editMessageText" and p["text"] == ANSWER]
    assert {int(e["message_id"]) for e in edits} == {answer_messages[0]["sent_message_id"]}
    assert conflicts == 0, "never two pollers at once"
    assert len(fake_model.agent_requests) == 2, "each message became one run"


async def test_an_update_the_killed_copy_had_not_stored_is_answered_by_the_standby(
    bus: Bus, telegram: FakeTelegram, fake_model: FakeOpenAI, tmp_path: Path, start_copies: StartCopies
) -> None:
    """The active copy fetched an update but the bus could not store it yet (a stream's leader
    elected) when the copy was SIGKILLed: Telegram still has it, unconfirmed, and the standby
    fetches and answers it. (Confirming a batch on the next poll, before it is handled, as
    python-telegram-bot's updater does, loses it.)"""
    fake_model.script(Reply(text="Kept for me.", when="keep this"))
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    streams = [bus.subjects.chat_in_partition_stream(k) for k in range(await chat_partitions(bus))]
    async with start_copies("telegram", settings) as copies:
        configs = [(await bus.js.stream_info(name)).config for name in streams]
        taken = [list(config.subjects or []) for config in configs]
        for config in configs:  # nothing stores chat messages now
            config.subjects = [f"{bus.config.prefix}.parked.{config.name}"]
            await bus.js.update_stream(config)
        telegram.send_user_message("keep this")
        await eventually(
            lambda: "trying again" in copy_logs(tmp_path, "telegram"), "the active copy failing to store it"
        )
        active = await lease_holder(bus, "telegram", copies)
        os.kill(active.pid, signal.SIGKILL)
        for config, subjects in zip(configs, taken, strict=True):
            config.subjects = subjects
            await bus.js.update_stream(config)
        await eventually(
            lambda: [p for m, p in telegram.calls if m == "sendMessage" and p["text"] == "Kept for me."],
            f"the standby answering it\n{copy_logs(tmp_path, 'telegram')}",
        )
    assert [r["messages"][-1]["content"] for r in fake_model.agent_requests] == ["keep this"], "once"


async def test_an_adapter_whose_lease_another_copy_took_stands_by_and_takes_over_again(
    bus: Bus, telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    """Losing the lease stops polling but not the process (under `antler up` a component that failed
    would stop every other): it stands by and is the active copy again once the other goes."""
    other = Leases(bus, "telegram-elsewhere", telegram_stack.bus.lease_seconds)
    await other.open()
    kv = await bus.kv(bus.subjects.leases_bucket)
    await kv.purge("adapter.telegram")  # as if ours had lapsed while its process stalled
    taken = await other.claim("adapter.telegram")
    assert taken is not None
    renewing = asyncio.create_task(renew_until_lost(other, taken, asyncio.Event()))
    try:
        for _ in range(200):  # ours notices at its next renewal and stops polling
            before = telegram.polls
            await asyncio.sleep(telegram_stack.bus.lease_seconds / 3)
            if telegram.polls == before:
                break
        else:
            pytest.fail("the adapter went on polling without its lease")
        fake_model.script(Reply(text="Back again."))
        telegram.send_user_message("anyone there?")
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
    await other.release(taken)  # the other copy goes
    sent = await telegram.wait_for("sendMessage", timeout=60)
    assert sent[0]["text"] == "Back again."
