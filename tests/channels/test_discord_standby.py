"""Two copies of the Discord adapter: one holds the gateway connection, one stands by. The active one
is SIGKILLed mid-answer; the standby connects and finishes the answer in the message already
shown, answers what comes next, and Discord never sees two sessions of the bot at once (each would
get every message)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bus import Bus
from tests.channels.conftest import StartCopies, copy_logs, lease_holder
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(150)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


async def test_the_standby_copy_connects_and_finishes_the_answer_once(
    bus: Bus, discord: FakeDiscord, fake_model: FakeOpenAI, tmp_path: Path, start_copies: StartCopies
) -> None:
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    settings = {"bot_token": discord.token, "base_url": discord.api_base}
    async with start_copies("discord", settings) as copies:
        await discord.wait(lambda: discord.live == 1, 30)
        discord.user_message("tell me slowly")
        # Once the message shown has been edited, the adapter's bookkeeping knows it.
        await discord.wait_for("editMessage", timeout=60)
        active = await lease_holder(bus, "discord", copies)
        os.kill(active.pid, signal.SIGKILL)
        await discord.wait(lambda: discord.identified == 2 and discord.live == 1, 60)
        discord.user_message("and now?")
        try:
            await discord.wait(
                lambda: {m["content"] for m in discord.bot_messages()} == {ANSWER, "still here"}, 90
            )
        except TimeoutError:
            pytest.fail(
                f"the standby did not finish: {discord.bot_messages()}\n{copy_logs(tmp_path, 'discord')}"
            )
    messages = discord.bot_messages()
    assert [m["content"] for m in messages] == [ANSWER, "still here"], "the answer stays in its message"
    assert ANSWER.startswith(messages[0]["edits"][0]), "streamed before the kill, finished after it"
    assert discord.most_live == 1, "never two gateway sessions at once"
    assert len(fake_model.agent_requests) == 2, "each message became one run"
