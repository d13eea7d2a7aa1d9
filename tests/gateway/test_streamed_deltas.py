"""Coalesced deltas through the gateway: an SSE client still gets every character, in order."""

from __future__ import annotations

from typing import Any

from langgraph_sdk.client import LangGraphClient

from tests.fakes.openai_server import FakeOpenAI, Reply

HI = {"messages": [{"role": "user", "content": "Tell me a long story"}]}


def pieces(parts: list[Any]) -> list[tuple[str, str]]:
    """(reasoning, answer text) of each streamed AI delta, in the order the client got them."""
    found = []
    for part in parts:
        if part.event == "messages" and part.data[0].get("type") == "AIMessageChunk":
            chunk = part.data[0]
            reasoning = (chunk.get("additional_kwargs") or {}).get("reasoning_content", "")
            found.append((reasoning, chunk.get("content") or ""))
    return found


async def test_an_sse_client_gets_a_long_answer_exactly_and_in_order_in_fewer_events(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    answer = " ".join(f"word{i}" for i in range(150))
    thinking = " ".join(f"thought{i}" for i in range(40))
    fake_model.script(Reply(text=answer, reasoning=thinking, chunk_delay=0.002))
    thread = await ana.threads.create()
    parts = [
        part
        async for part in ana.runs.stream(
            thread["thread_id"], "lead_agent", input=HI, stream_mode=["messages-tuple"]
        )
    ]
    streamed = pieces(parts)
    assert "".join(answer for _, answer in streamed) == answer
    assert "".join(reasoning for reasoning, _ in streamed) == thinking
    first_text = next(i for i, (_, text) in enumerate(streamed) if text)
    assert all(not reasoning for reasoning, _ in streamed[first_text:]), "the reasoning comes first"
    assert len(streamed) < 150, f"{len(streamed)} events for 190 deltas: they were not merged"
    assert parts[-1].event != "error"
