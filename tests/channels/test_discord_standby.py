"""Two copies of the Discord adapter: one holds the gateway connection, one stands by. The active one
is SIGKILLed mid-answer; the standby RESUMEs its gateway session (kept on the bus), so what users
wrote during the switch is replayed and answered, finishes the answer in the message already
shown, and Discord never sees two sessions of the bot at once (each would get every message). A
session Discord no longer resumes (op 9) is replaced by a new one (IDENTIFY)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from bus import Bus
from tests.channels.conftest import Copies, StartCopies, copy_logs, lease_holder
from tests.fakes.discord_server import DM_CHANNEL, GENERAL, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(150)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


async def _kill_the_active_copy_mid_answer(bus: Bus, fake: FakeDiscord, copies: Copies) -> None:
    await fake.wait(lambda: fake.live == 1, 30)
    fake.user_message("tell me slowly")
    # Once the message shown has been edited, the adapter's bookkeeping knows it.
    await fake.wait_for("editMessage", timeout=60)
    active = await lease_holder(bus, "discord", copies)
    os.kill(active.pid, signal.SIGKILL)
    await active.wait()
    await fake.wait(lambda: fake.live == 0, 30)


async def _until_answered(fake: FakeDiscord, tmp_path: Path, expected: set[str]) -> None:
    try:
        await fake.wait(lambda: {m["content"] for m in fake.bot_messages()} == expected, 90)
    except TimeoutError:
        pytest.fail(f"the standby did not finish: {fake.bot_messages()}\n{copy_logs(tmp_path, 'discord')}")


@pytest.fixture
def two_copies(
    discord: FakeDiscord, start_copies: StartCopies
) -> Callable[[], contextlib.AbstractAsyncContextManager[Copies]]:
    """`async with two_copies() as copies:` two Discord adapter processes, one active, one standing by."""
    return lambda: start_copies("discord", {"bot_token": discord.token, "base_url": discord.api_base})


async def test_the_standby_resumes_the_session_hears_what_was_said_meanwhile_and_finishes_once(
    bus: Bus,
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    tmp_path: Path,
    two_copies: Callable[[], contextlib.AbstractAsyncContextManager[Copies]],
) -> None:
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4),
        Reply(text="still here", when="and now?"),
        Reply(text="in the guild", when="over here"),
    )
    async with two_copies() as copies:
        await _kill_the_active_copy_mid_answer(bus, discord, copies)
        discord.user_message("and now?")  # no copy is connected: only a resumed session hears it
        discord.user_message("over here", channel_id=GENERAL, mention=True)
        await _until_answered(discord, tmp_path, {ANSWER, "still here", "in the guild"})
        assert (discord.identified, discord.resumed) == (1, 1), "the standby resumed the session"
    messages = discord.bot_messages(DM_CHANNEL)
    assert [m["content"] for m in messages] == [ANSWER, "still here"], "the answer stays in its message"
    assert discord.bot_messages(GENERAL)[0]["content"] == "in the guild", "a guild channel is still one"
    assert ANSWER.startswith(messages[0]["edits"][0]), "streamed before the kill, finished after it"
    assert discord.most_live == 1, "never two gateway sessions at once"
    assert len(fake_model.agent_requests) == 3, "each message became one run (a replay none more)"


async def test_a_session_discord_no_longer_resumes_is_replaced_by_a_new_one(
    bus: Bus,
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    tmp_path: Path,
    two_copies: Callable[[], contextlib.AbstractAsyncContextManager[Copies]],
) -> None:
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="new session", when="hello?")
    )
    async with two_copies() as copies:
        await _kill_the_active_copy_mid_answer(bus, discord, copies)
        discord.invalidate_sessions()
        await discord.wait(lambda: discord.identified == 2 and discord.live == 1, 60)
        assert discord.invalid_sessions_told == 1, "the standby tried to resume first"
        discord.user_message("hello?")
        await _until_answered(discord, tmp_path, {ANSWER, "new session"})
    assert discord.resumed == 0
    assert discord.most_live == 1, "never two gateway sessions at once"
