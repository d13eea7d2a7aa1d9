"""Runs that no chat message started, through a runner crash: a goal's continuation and a scheduled
task's run are both at work in the model when every runner process is SIGKILLed. Each is
redelivered and resumed: the goal loop ends by itself and its chat gets the final answer exactly
once; the scheduled task's chat gets the task's answer exactly once.

(One stack for both: each `antler up` costs some 7 s of CPU, and the two runs are apart in every
way but the runners they lose: their own chats, their own model replies, their own records.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from nats.js.api import DeliverPolicy

from agents.threads.goal import continuation_run_id
from bus import Bus, decode
from bus.messages import InboundMessage, OutboundMessage, RunRecord
from bus.records import RecordStore
from channels.router import RUN_NAMESPACE
from tests.fakes.openai_server import Reply
from tests.faults.budget import ONE_AT_A_TIME, QUIET, STOP_TIMEOUT, TIMEOUT
from tests.faults.conftest import SlowEcho
from tests.faults.harness import UpFactory, admin_bus
from tests.support.nats_users import logged_violations

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

GOAL = "Write a titled haiku"
NEXT_STEP = "Next step: give it a title"
FINAL_ANSWER = "Title: The Pond. An old silent pond, a frog jumps in."
TASK = "water the plants"
TASK_ANSWER = "The plants are watered."


async def send(bus: Bus, chat_id: str, text: str) -> InboundMessage:
    message = InboundMessage(channel="script", chat_id=chat_id, message_id=uuid.uuid4().hex, text=text)
    await bus.publish(bus.subjects.chat_in("script", chat_id), message, msg_id=message.dedupe_id())
    return message


async def test_runners_killed_during_a_goal_continuation_and_a_scheduled_run_resume_both_answered_once(
    fault_config: Callable[..., Path], antler_up: UpFactory, echo_model: SlowEcho, tmp_path: Path
) -> None:
    up = antler_up(fault_config())
    await up.start()
    bus = await admin_bus(await up.nats_url(), tmp_path / "data")
    finals: dict[str, list[OutboundMessage]] = {"poet": [], "garden": []}
    goal_reached, task_answered = asyncio.Event(), asyncio.Event()

    async def on_reply(msg: object) -> None:
        out = decode(OutboundMessage, msg.data)  # type: ignore[attr-defined]
        if out.kind == "partial" or out.chat_id not in finals:
            return
        finals[out.chat_id].append(out)
        if "(goal reached)" in out.text:
            goal_reached.set()
        if out.text == TASK_ANSWER:
            task_answered.set()

    sub = await bus.js.subscribe(
        bus.subjects.chat_out("script"), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL, cb=on_reply
    )
    held = asyncio.Event()
    try:
        # The continuation's and the scheduled run's first tries hang in the model until their
        # runner is gone; their resumed attempts get the same answers at once.
        echo_model.script(
            Reply(text="An old silent pond, a frog jumps in.", when=GOAL),
            Reply(text=FINAL_ANSWER, when=NEXT_STEP, hold=held),
            Reply(text=FINAL_ANSWER, when=NEXT_STEP),
            Reply(text=TASK_ANSWER, when=TASK, hold=held),
            Reply(text=TASK_ANSWER, when=TASK),
        )
        echo_model.verdicts(
            {"verdict": "continue", "reason": "no title yet", "next_step": "give it a title"},
            {"verdict": "done", "reason": "a titled haiku"},
        )
        goal = await send(bus, "poet", f"/goal {GOAL}")
        await send(bus, "garden", f"/schedule in 1s {TASK}")
        first_run = str(uuid.uuid5(RUN_NAMESPACE, goal.dedupe_id()))
        continuation = continuation_run_id(first_run)

        def at_work(text: str) -> bool:
            return any(text in json.dumps(body.get("messages")) for body in echo_model.agent_requests)

        # The continuation is at work, and the task fired and its run is in the model.
        await echo_model.wait_until(lambda: at_work(NEXT_STEP) and at_work(TASK), timeout=60)
        victims = up.runners()
        for victim in victims:
            os.kill(victim.pid, signal.SIGKILL)
        held.set()
        await asyncio.wait_for(asyncio.gather(goal_reached.wait(), task_answered.wait()), 90)
        await asyncio.sleep(QUIET)  # a late second final would land in this window

        assert victims, "there was a runner process to kill"
        runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
        # The goal: its loop went on after the crash, judged each run once, and ended once.
        texts = [r.text for r in finals["poet"]]
        assert texts == [
            "goal: continuing (1/8) — next: give it a title",
            f"{FINAL_ANSWER}\n\n(goal reached)",
        ], up.tail()
        assert [r.run_id for r in finals["poet"]] == [first_run, continuation]
        record = await runs.get(continuation)
        assert record is not None
        assert record.attempt >= 2, "the continuation was redelivered and resumed"
        assert len(echo_model.verdict_requests) == 2, "each run judged once"
        # The scheduled task: made, fired, resumed after the crash, answered once.
        texts = [out.text for out in finals["garden"]]
        assert len(texts) == 2, (texts, up.tail())
        assert texts[0].startswith("Scheduled #1: once at "), texts
        assert texts[1] == TASK_ANSWER, texts
        run_id = finals["garden"][1].run_id
        assert run_id is not None
        record = await runs.get(run_id)
        assert record is not None
        assert record.metadata.get("scheduled_task_id"), "the answer is the scheduled run's"
        assert record.attempt >= 2, "the scheduled run was redelivered and resumed"
        assert not logged_violations(up.workdir), "no component was refused by the nats-server"
        assert await up.stop(STOP_TIMEOUT) == 0
    finally:
        held.set()
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await bus.nc.close()
