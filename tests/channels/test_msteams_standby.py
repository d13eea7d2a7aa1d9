"""Two `antler run msteams` processes: one serves the messaging endpoint and answers, the other
stands by. The active one is SIGKILLed mid-answer; the standby takes the port over, finishes the
answer in the message already shown, and the Bot Connector's retry of an activity is answered once.
"""

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
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support import adapters
from tests.support.adapters import adapter_stack
from tests.support.ports import free_port

teams = adapters.teams  # the fake Teams, a fixture

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(200)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


def texts(fake: FakeTeams) -> list[str]:
    return [m["text"] for m in fake.bot_messages()]


async def test_the_standby_takes_the_endpoint_over_and_finishes_the_answer_once(
    bus: Bus,
    teams: FakeTeams,
    fake_model: FakeOpenAI,
    nats_url: str,
    tmp_path: Path,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    config_file: Callable[[], Path],
) -> None:
    port = free_port()
    config_data["bus"]["lease_seconds"] = 4  # a busy machine stalls a process for a second or two
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    await bus.nc.subscribe(bus.subjects.component_ready("msteams"), cb=on_ready)
    async with adapter_stack(nats_url, config_data, app_config, "msteams", teams.settings(port), None):
        async with adapter_processes(config_file(), nats_url, tmp_path, 2, "msteams") as procs:
            pids = {await asyncio.wait_for(ready.get(), 60), await asyncio.wait_for(ready.get(), 60)}
            assert pids == {p.pid for p in procs}, "one serving, one standing by"
            await teams.say("tell me slowly")
            await teams.wait_for("updateActivity", timeout=60)  # shown, and being updated
            holder = (await (await bus.kv(bus.subjects.leases_bucket)).get("adapter.msteams")).value
            active = next(p for p in procs if f"-{p.pid}-" in (holder or b"").decode())
            os.kill(active.pid, signal.SIGKILL)
            await active.wait()
            retry = teams.activity("and now?")
            first = await teams.post(retry)  # refused connections are tried again, as a client does
            again = await teams.post(retry)  # the Bot Connector sending it again
            assert (first.status_code, again.status_code) == (200, 200)
            try:
                await teams.wait(lambda: texts(teams) == [ANSWER, "still here"], 90)
            except TimeoutError:
                logs = "\n".join((tmp_path / f"msteams-{n}.log").read_text()[-3000:] for n in range(2))
                pytest.fail(f"the standby did not finish: {teams.bot_messages()}\n{logs}")
    first_reply = teams.bot_messages()[0]
    assert ANSWER.startswith(first_reply["edits"][0]), "streamed before the kill, finished after it"
    assert len(fake_model.agent_requests) == 2, "each message became one run, the retry none"
