"""Two `antler run msteams` processes: one serves the messaging endpoint and answers, the other
stands by. The active one is SIGKILLed mid-answer; the standby takes the port over, finishes the
answer in the message already shown, and the Bot Connector's retry of an activity is answered once.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bus import Bus
from tests.channels.conftest import StartCopies, copy_logs, lease_holder
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.ports import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(200)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


def texts(fake: FakeTeams) -> list[str]:
    return [m["text"] for m in fake.bot_messages()]


async def test_the_standby_takes_the_endpoint_over_and_finishes_the_answer_once(
    bus: Bus, teams: FakeTeams, fake_model: FakeOpenAI, tmp_path: Path, start_copies: StartCopies
) -> None:
    fake_model.script(
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4), Reply(text="still here", when="and now?")
    )
    async with start_copies("msteams", teams.settings(free_port())) as copies:
        await teams.say("tell me slowly")
        await teams.wait_for("updateActivity", timeout=60)  # shown, and being updated
        active = await lease_holder(bus, "msteams", copies)
        os.kill(active.pid, signal.SIGKILL)
        await active.wait()
        retry = teams.activity("and now?")
        first = await teams.post(retry)  # refused connections are tried again, as a client does
        again = await teams.post(retry)  # the Bot Connector sending it again
        assert (first.status_code, again.status_code) == (200, 200)
        try:
            await teams.wait(lambda: texts(teams) == [ANSWER, "still here"], 90)
        except TimeoutError:
            logs = copy_logs(tmp_path, "msteams")
            pytest.fail(f"the standby did not finish: {teams.bot_messages()}\n{logs}")
    first_reply = teams.bot_messages()[0]
    assert ANSWER.startswith(first_reply["edits"][0]), "streamed before the kill, finished after it"
    assert len(fake_model.agent_requests) == 2, "each message became one run, the retry none"
