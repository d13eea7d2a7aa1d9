"""Model calls that recover: a rate-limit burst is waited out (as the provider asks), each wait is a
run event, and a model that stays unreachable ends the run with a readable error after the
configured tries. The scripted model answers over real HTTP; the runner runs against a real NATS."""

from __future__ import annotations

from typing import Any

import pytest

from bus import Bus
from bus.messages import RunStatus
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.ports import free_port
from tests.support.runner import StartRunner, ask, submit_and_collect

pytestmark = pytest.mark.asyncio


def retries_of(events: list[Any]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.event == "custom" and e.data.get("type") == "llm_retry"]


def text_of(events: list[Any]) -> str:
    return "".join(
        e.data[0]["content"]
        for e in events
        if e.event == "messages" and e.data[0].get("type") == "AIMessageChunk"
    )


async def test_a_rate_limit_burst_is_waited_out_and_the_run_answers_with_retry_events(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["title"] = {"enabled": False}
    fake_model.refuse(1, retry_after="1")  # the provider says when to come back
    fake_model.refuse(2)  # and then does not
    fake_model.script(Reply(text="Here after all."))
    async with start_runner():
        events = await submit_and_collect(
            bus, ask("t-burst", "hello", stream_mode=["messages-tuple", "values", "custom"])
        )

    assert events[-1].data["status"] == "success"
    assert text_of(events) == "Here after all."
    retries = retries_of(events)
    assert [(r["attempt"], r["max_attempts"]) for r in retries] == [(2, 5), (3, 5), (4, 5)]
    assert retries[0]["wait_seconds"] == 1.0, "Retry-After is what the first wait was"
    assert retries[0]["model"] == "fake"
    assert retries[0]["reason"].startswith("429 ")
    assert "Rate limit reached" in retries[0]["reason"]
    assert fake_model.refused == 3
    assert len(fake_model.agent_requests) == 1, "refused requests never reached the script"


async def test_a_dead_endpoint_ends_the_run_with_a_readable_error_after_the_configured_tries(
    bus: Bus, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    closed = free_port()  # a port nothing listens on
    config_data["models"][0]["base_url"] = f"http://127.0.0.1:{closed}/v1"
    config_data["model_calls"]["max_attempts"] = 3
    async with start_runner():
        events = await submit_and_collect(
            bus, ask("t-dead", "hello", stream_mode=["messages-tuple", "values", "custom"])
        )

    assert [(r["attempt"], r["max_attempts"]) for r in retries_of(events)] == [(2, 3), (3, 3)]
    error = next(e.data for e in events if e.event == "error")
    assert error["error"] == "ModelUnavailable"
    assert error["message"].startswith("the model 'fake' could not be reached (tried 3 times; last: ")
    assert "Connection error" in error["message"]
    assert error["message"].endswith("please try again in a moment")
    assert events[-1].data["status"] == RunStatus.ERROR.value
