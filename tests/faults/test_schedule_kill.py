"""A scheduled run through a runner crash: a task made in a chat fires, its run is at work in the model
when every runner process is SIGKILLed; the run is redelivered and resumed, and the chat gets the
task's answer exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from nats.js.api import DeliverPolicy

from bus import decode
from bus.messages import InboundMessage, OutboundMessage, RunRecord
from bus.records import RecordStore
from tests.fakes.openai_server import Reply
from tests.faults.budget import ONE_AT_A_TIME, QUIET, STOP_TIMEOUT, TIMEOUT
from tests.faults.conftest import SlowEcho
from tests.faults.harness import UpFactory, admin_bus
from tests.support.nats_users import logged_violations

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

ANSWER = "The plants are watered."


async def test_runner_killed_during_a_scheduled_run_resumes_it_and_the_chat_gets_one_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, echo_model: SlowEcho, tmp_path: Path
) -> None:
    up = antler_up(fault_config())
    await up.start()
    bus = await admin_bus(await up.nats_url(), tmp_path / "data")
    finals: list[OutboundMessage] = []
    answered = asyncio.Event()

    async def on_reply(msg: object) -> None:
        out = decode(OutboundMessage, msg.data)  # type: ignore[attr-defined]
        if out.kind != "partial" and out.chat_id == "garden":
            finals.append(out)
            if out.text == ANSWER:
                answered.set()

    sub = await bus.js.subscribe(
        bus.subjects.chat_out("script"), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL, cb=on_reply
    )
    held = asyncio.Event()
    try:
        # The scheduled run's first try hangs in the model until its runner is gone; the resumed
        # attempt gets the same answer at once.
        echo_model.script(
            Reply(text=ANSWER, when="water the plants", hold=held),
            Reply(text=ANSWER, when="water the plants"),
        )
        message = InboundMessage(
            channel="script",
            chat_id="garden",
            message_id=uuid.uuid4().hex,
            text="/schedule in 1s water the plants",
        )
        await bus.publish(
            bus.subjects.chat_in("script", message.chat_id), message, msg_id=message.dedupe_id()
        )

        def at_work() -> bool:
            return any("water the plants" in str(body.get("messages")) for body in echo_model.agent_requests)

        await echo_model.wait_until(at_work, timeout=60)  # the task fired and its run is in the model
        victims = up.runners()
        for victim in victims:
            os.kill(victim.pid, signal.SIGKILL)
        held.set()
        await asyncio.wait_for(answered.wait(), 90)
        await asyncio.sleep(QUIET)  # a late second answer would land in this window

        texts = [out.text for out in finals]
        assert len(texts) == 2, (texts, up.tail())
        assert texts[0].startswith("Scheduled #1: once at "), texts
        assert texts[1] == ANSWER, texts
        run_id = finals[1].run_id
        assert run_id is not None
        record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(run_id)
        assert record is not None
        assert record.metadata.get("scheduled_task_id"), "the answer is the scheduled run's"
        assert record.attempt >= 2, "the scheduled run was redelivered and resumed"
        assert victims, "there was a runner process to kill"
        assert not logged_violations(up.workdir), "no component was refused by the nats-server"
        assert await up.stop(STOP_TIMEOUT) == 0
    finally:
        held.set()
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await bus.nc.close()
