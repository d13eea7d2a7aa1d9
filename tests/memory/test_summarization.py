"""Summarization, on by default: a thread past its model's context window is summarised and keeps
answering, and what the summary replaced is handed to the memory updater first."""

from __future__ import annotations

from typing import Any

import pytest

from bus import Bus
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.memory import MEMORY_PROMPT, facts, memory_calls, memory_of, memory_reply, running_updater
from tests.support.runner import StartStack, ask, running_runner, submit_and_collect
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio

SUMMARY_PROMPT = "Context Extraction Assistant"  # LangChain's summary prompt, the default
SUMMARY_HEAD = "Here is a summary of the conversation to date"
FACT = "My cat is called Miso and she is 7 years old."


def filler(topic: str) -> str:
    """About 450 tokens of text about `topic`."""
    return " ".join(f"{topic} note {n}: the quarterly figures were reviewed twice." for n in range(40))


def sent(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") != "system"]


async def test_a_thread_past_its_context_window_is_summarised_keeps_answering_and_memory_gets_the_facts(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], start_stack: StartStack
) -> None:
    config_data["models"][0]["context_window"] = 1000  # summarised from 800 tokens; 300 kept
    config_data["memory"] = {"enabled": True, "debounce_seconds": 0.2}
    config_data["title"] = {"enabled": False}
    async with start_stack(running_runner) as config:
        fake_model.script(Reply(text="Noted."))
        first = await submit_and_collect(bus, ask("t-long", f"{FACT} {filler('garden')}", user_id="ana"))
        assert first[-1].data["status"] == "success"

        fake_model.script(
            Reply(text="- The user's cat is Miso, 7 years old.", when=SUMMARY_PROMPT),
            Reply(text="Your cat is called Miso.", when="what is my cat called"),
        )
        second = await submit_and_collect(
            bus, ask("t-long", f"{filler('budget')} So, what is my cat called?", user_id="ana")
        )
        assert second[-1].data["status"] == "success"
        assert streamed_text(second) == "Your cat is called Miso.", "the summary is not streamed"
        answered = sent(fake_model.agent_requests[-1])
        assert answered[0].startswith(SUMMARY_HEAD), "the model got the summary in place of the older turns"
        assert "The user's cat is Miso" in answered[0]
        assert not any("garden note" in text for text in answered), "the older turns themselves are gone"
        values = [e for e in second if e.event == "values"][-1].data["messages"]
        assert values[0]["content"].startswith(SUMMARY_HEAD), "the thread's history is the summary now"
        assert values[-1]["content"] == "Your cat is called Miso."

        fake_model.script(Reply(text="She is 7.", when="how old is she"))
        third = await submit_and_collect(bus, ask("t-long", "And how old is she?", user_id="ana"))
        assert third[-1].data["status"] == "success"
        assert sent(fake_model.agent_requests[-1])[0].startswith(SUMMARY_HEAD), "later turns build on it"

    # The memory updater comes up afterwards: what was summarised away waits for it on the bus.
    miso = "The user's cat is called Miso"
    fake_model.script(memory_reply(miso), memory_reply(miso))
    async with running_updater(nats_url, config):
        doc = await memory_of(bus, "ana", lambda d: bool(d.facts))
        assert facts(doc) == [miso]
        asked = [str(r["messages"][-1]["content"]) for r in memory_calls(fake_model)]
        assert any(FACT in text for text in asked), "the summarised turns themselves reached memory"
        assert all(MEMORY_PROMPT in text for text in asked)
