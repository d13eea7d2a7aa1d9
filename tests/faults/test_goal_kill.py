"""Goal mode through a runner crash: the runner processes are SIGKILLed while a goal's continuation is
at work; the continuation is redelivered and resumed, the loop ends by itself, and the chat gets its
final answer exactly once."""

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

from agents.goal import continuation_run_id
from bus import decode
from bus.messages import InboundMessage, OutboundMessage, RunRecord
from bus.records import RecordStore
from channels.router import RUN_NAMESPACE
from tests.fakes.openai_server import Reply
from tests.faults.budget import ONE_AT_A_TIME, QUIET, STOP_TIMEOUT, TIMEOUT
from tests.faults.conftest import SlowEcho
from tests.faults.harness import UpFactory, admin_bus

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

FINAL_ANSWER = "Title: The Pond. An old silent pond, a frog jumps in."


async def test_runner_killed_during_a_goal_continuation_resumes_the_loop_and_answers_once(
    fault_config: Callable[..., Path], antler_up: UpFactory, echo_model: SlowEcho, tmp_path: Path
) -> None:
    up = antler_up(fault_config())
    await up.start()
    bus = await admin_bus(await up.nats_url(), tmp_path / "data")
    replies: list[OutboundMessage] = []
    reached = asyncio.Event()

    async def on_reply(msg: object) -> None:
        out = decode(OutboundMessage, msg.data)  # type: ignore[attr-defined]
        replies.append(out)
        if out.kind != "partial" and "(goal reached)" in out.text:
            reached.set()

    sub = await bus.js.subscribe(
        bus.subjects.chat_out("script"), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL, cb=on_reply
    )
    held = asyncio.Event()
    try:
        echo_model.script(
            Reply(text="An old silent pond, a frog jumps in."),
            # The continuation's first try hangs in the model until its runner is gone; its resumed
            # attempt gets the same answer at once.
            Reply(text=FINAL_ANSWER, when="Next step: give it a title", hold=held),
            Reply(text=FINAL_ANSWER, when="Next step: give it a title"),
        )
        echo_model.verdicts(
            {"verdict": "continue", "reason": "no title yet", "next_step": "give it a title"},
            {"verdict": "done", "reason": "a titled haiku"},
        )
        message = InboundMessage(
            channel="script", chat_id="poet", message_id=uuid.uuid4().hex, text="/goal Write a titled haiku"
        )
        await bus.publish(
            bus.subjects.chat_in("script", message.chat_id), message, msg_id=message.dedupe_id()
        )
        first_run = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        continuation = continuation_run_id(first_run)

        await echo_model.wait_for_requests(2, timeout=60)  # the continuation is at work
        victims = up.runners()
        for victim in victims:
            os.kill(victim.pid, signal.SIGKILL)
        held.set()
        await asyncio.wait_for(reached.wait(), 90)
        await asyncio.sleep(QUIET)  # a late second final would land in this window

        finals = [r for r in replies if r.kind != "partial" and r.chat_id == "poet"]
        texts = [r.text for r in finals]
        assert texts == [
            "goal: continuing (1/8) — next: give it a title",
            f"{FINAL_ANSWER}\n\n(goal reached)",
        ], up.tail()
        assert [r.run_id for r in finals] == [first_run, continuation]
        record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(continuation)
        assert record is not None
        assert record.attempt >= 2, "the continuation was redelivered and resumed"
        assert len(echo_model.verdict_requests) == 2, "each run judged once"
        assert victims, "there was a runner process to kill"
        assert await up.stop(STOP_TIMEOUT) == 0
    finally:
        held.set()
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await bus.nc.close()
