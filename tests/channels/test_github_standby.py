"""Two `antler run github` processes: both serve the webhook (sharing its port), one posts the
answers. A delivery that reaches both copies is answered once; the copy posting an answer is
SIGKILLed mid-answer, and the other finishes it in the comment already shown."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from channels.github.adapter import WRITING
from config import AppConfig
from tests.channels.conftest import adapter_processes, copies_ready
from tests.fakes.github_server import FakeGitHub
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.adapters import ENQUEUE, adapter_stack
from tests.support.ports import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(200)]

ANSWER = "one two three four five six seven eight nine ten eleven twelve"


async def test_two_copies_answer_a_delivery_once_and_the_standby_finishes_a_killed_answer(
    bus: Bus,
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
        Reply(text="only once", when="twice delivered"),
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4),
        Reply(text="still here", when="and now?"),
    )
    async with FakeGitHub() as github, copies_ready(bus, "github") as all_ready:
        settings = github.settings(port)
        async with (
            adapter_stack(nats_url, config_data, app_config, "github", settings, None, ENQUEUE),
            adapter_processes(config_file(), nats_url, tmp_path, 2, "github") as procs,
        ):
            await all_ready(procs)
            payload = github.issue_comment("@antler-bot twice delivered", number=3)
            answers = [
                await github.deliver("issue_comment", payload, delivery="redeliver-1") for _ in range(6)
            ]
            assert {a.status_code for a in answers} == {200}
            await github.wait(lambda: github.bodies() == ["only once"], timeout=60)

            await github.deliver("issue_comment", github.issue_comment("@antler-bot tell me slowly"))
            await github.wait_for("update", timeout=60)  # shown, and edited as it streams
            release = github.hold("update")  # the next edit is on its way when the copy dies
            await github.wait(lambda: "update" in github.holding, timeout=60)
            holder = (await (await bus.kv(bus.subjects.leases_bucket)).get("adapter.github")).value
            active = next(p for p in procs if f"-{p.pid}-" in (holder or b"").decode())
            os.kill(active.pid, signal.SIGKILL)
            await active.wait()
            updates_before = len(await github.wait_for("update"))
            release.set()  # it reaches GitHub after all, as a request already sent does
            await github.deliver("issue_comment", github.issue_comment("@antler-bot and now?"))
            try:
                await github.wait(lambda: set(github.bodies()) == {"only once", ANSWER, "still here"}, 90)
            except TimeoutError:
                logs = "\n".join((tmp_path / f"github-{n}.log").read_text()[-3000:] for n in range(2))
                pytest.fail(f"the standby did not finish: {github.bodies()}\n{logs}")
    comments = github.answers()
    assert [c["body"] for c in comments] == ["only once", ANSWER, "still here"], (
        "the answer stays in its comment"
    )
    assert comments[1]["edits"], "streamed before the kill"
    assert all(ANSWER.startswith(shown.removesuffix(WRITING)) for shown in comments[1]["edits"])
    assert len(fake_model.agent_requests) == 3, "each delivery became one run"
    updates = [call for name, call in github.calls if name == "update"]
    assert len(updates) >= updates_before + 2, (
        "the standby edited the comment after the killed copy's last edit"
    )
    # The answer's comment ends with the whole answer (the next question's may be edited after it).
    assert [u["body"] for u in updates if u["id"] == comments[1]["id"]][-1] == ANSWER
