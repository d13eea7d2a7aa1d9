"""Two copies of the Discord adapter: one holds the gateway connection, one stands by. The active one
is SIGKILLed mid-answer; the standby connects and finishes the answer in the message already
shown, answers what comes next, and Discord never sees two sessions of the bot at once (each would
get every message)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus, decode
from bus.messages import ComponentReady
from config import AppConfig
from tests.channels.conftest import adapter_processes
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.adapters import adapter_stack, discord  # noqa: F401  (the fake Discord fixture)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(150)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


async def test_the_standby_copy_connects_and_finishes_the_answer_once(
    bus: Bus,
    discord: FakeDiscord,  # noqa: F811
    fake_model: FakeOpenAI,
    nats_url: str,
    tmp_path: Path,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    config_file: Callable[[], Path],
) -> None:
    config_data["bus"]["lease_seconds"] = 4  # a busy machine stalls a process for a second or two
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    settings = {"bot_token": discord.token, "base_url": discord.api_base}
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    await bus.nc.subscribe(bus.subjects.component_ready("discord"), cb=on_ready)
    async with adapter_stack(nats_url, config_data, app_config, "discord", settings, None):
        async with adapter_processes(config_file(), nats_url, tmp_path, 2, "discord") as procs:
            first, second = await asyncio.wait_for(ready.get(), 60), await asyncio.wait_for(ready.get(), 60)
            assert {first, second} == {p.pid for p in procs}, "one active, one standing by"
            await discord.wait(lambda: discord.live == 1, 30)
            discord.user_message("tell me slowly")
            # Once the message shown has been edited, the adapter's bookkeeping knows it.
            await discord.wait_for("editMessage", timeout=60)
            holder = (await (await bus.kv(bus.subjects.leases_bucket)).get("adapter.discord")).value
            active = next(p for p in procs if f"-{p.pid}-" in (holder or b"").decode())
            os.kill(active.pid, signal.SIGKILL)
            await discord.wait(lambda: discord.identified == 2 and discord.live == 1, 60)
            discord.user_message("and now?")
            try:
                await discord.wait(
                    lambda: {m["content"] for m in discord.bot_messages()} == {ANSWER, "still here"}, 90
                )
            except TimeoutError:
                logs = "\n".join((tmp_path / f"discord-{n}.log").read_text()[-3000:] for n in range(2))
                pytest.fail(f"the standby did not finish: {discord.bot_messages()}\n{logs}")
    messages = discord.bot_messages()
    assert [m["content"] for m in messages] == [ANSWER, "still here"], "the answer stays in its message"
    assert ANSWER.startswith(messages[0]["edits"][0]), "streamed before the kill, finished after it"
    assert discord.most_live == 1, "never two gateway sessions at once"
    assert len(fake_model.agent_requests) == 2, "each message became one run"
